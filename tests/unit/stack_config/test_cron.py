"""certifier.schedule as Kubernetes' CronJob validation parses it (robfig/cron v3 ParseStandard), plus the
schedules that can never fire. Each case says what the API server answers (the real one: make e2e's
test_cron_schedules_the_api_server_accepts)."""

from __future__ import annotations

import pytest

from stack_config import cron

ACCEPTED = ["17 */6 * * *", "@daily", "@hourly", "@every 90m", "0 9 * * MON-FRI", "0 0 1 jan,jul *", "*/1 * * * *",
            "5/15 * * * *", "0 0 29 2 *", "0 0 ? * SUN", "0 0 31 2 1", " 0 0 * * * "]
REFUSED = {"60 */6 * * *": "minute: 60 is outside 0-59", "*/0 * * * *": "must be positive",
           "0 0 * * 7": "day of week: 7 is outside 0-6", "@fortnightly": "unknown descriptor",
           "0 0 31 2 *": "never fire", "0 0 31 4,6,9,11 *": "never fire", "* * * *": "5 fields",
           "TZ=UTC 0 0 * * *": "TZ=", "0 0 5-1 * *": "backwards", "0 0 * FOO *": "not a number or a name",
           "@every 0s": "never pause", "@every often": "unknown descriptor"}


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_what_kubernetes_accepts_is_accepted(schedule):
    assert cron.problem(schedule) is None


@pytest.mark.parametrize("schedule,words", REFUSED.items())
def test_what_kubernetes_refuses_or_never_fires_is_refused_with_the_reason(schedule, words):
    assert words in (cron.problem(schedule) or ""), cron.problem(schedule)


def test_the_longest_gap_between_two_runs_is_what_a_missing_run_alert_waits_for():
    """Issue 52 item 8: "no certification run for two periods" needs the schedule's period; a schedule
    with uneven gaps has its longest one (cron v3's day rule included)."""
    assert cron.longest_gap_seconds("17 */6 * * *") == 6 * 3600  # the default
    assert cron.longest_gap_seconds("0 1,2 * * *") == 23 * 3600
    assert cron.longest_gap_seconds("@daily") == cron.longest_gap_seconds("0 0 * * *") == 86400
    assert cron.longest_gap_seconds("@hourly") == 3600
    assert cron.longest_gap_seconds("@weekly") == cron.longest_gap_seconds("0 0 * * SUN") == 7 * 86400
    assert cron.longest_gap_seconds("@every 90m") == 5400
    assert cron.longest_gap_seconds("0 0 1 * *") == 31 * 86400  # monthly: the longest month
    # both day fields restricted: either matches (1st of the month or a Monday)
    assert cron.longest_gap_seconds("0 0 1 * 1") <= 7 * 86400
    assert cron.longest_gap_seconds("0 0 29 2 *") > 365 * 86400  # once in four years
