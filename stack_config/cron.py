"""A CronJob schedule checked as Kubernetes checks it, before anything is declared.

The API server validates `spec.schedule` with robfig/cron v3's `ParseStandard` (pkg/apis/batch/validation
validateScheduleFormat; cron v3 parser.go): five fields (minute, hour, day of month, month, day of week),
each a `*`, a value, a range `a-b` or a list of them, with an optional positive `/step`; month and day of
week also take names (JAN-DEC, SUN-SAT, any case); `?` stands for `*` in the day fields; day of week 7 is
not accepted (0-6). Or a descriptor: `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
`@hourly`, `@every <duration>`. A `TZ=`/`CRON_TZ=` prefix is refused (a CronJob has `timeZone` for it).
On top of that a schedule that can never fire (`0 0 31 2 *`), or fires continuously (`@every 0s`), is
refused here: Kubernetes accepts both (checked in make e2e), and the recurring certification would
silently never run, or run without pause.
"""

from __future__ import annotations

import datetime
import re

# (name, low, high, names) per field, as cron v3's bounds
FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
)
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# Go's time.ParseDuration units, one or more `<number><unit>` (what `@every` takes)
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")
DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February 29 exists in leap years


class CronError(ValueError):
    pass


def _value(text: str, low: int, high: int, names: dict[str, int], field: str) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise CronError(f"{field}: {text!r} is not a number" + (f" or a name ({', '.join(names).upper()})"
                                                                 if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{field}: {value} is outside {low}-{high}")
    return value


def _field(text: str, low: int, high: int, names: dict[str, int], field: str) -> tuple[set[int], bool]:
    """The values a field allows, and whether it is a star (`*` or `?`, which changes the day rule)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        if not part:
            raise CronError(f"{field}: an empty list item in {text!r}")
        span, _, step_text = part.partition("/")
        if _ and not step_text.isdigit():
            raise CronError(f"{field}: step {step_text!r} is not a number")
        step = int(step_text) if _ else 1
        if step == 0:
            raise CronError(f"{field}: the step of {part!r} must be positive")
        if span in ("*", "?"):
            start, end = low, high
            star = star or step == 1  # cron v3 keeps its star bit for `*` and `*/1` only
        elif "-" in span:
            a, b = span.split("-", 1)
            start, end = _value(a, low, high, names, field), _value(b, low, high, names, field)
            if start > end:
                raise CronError(f"{field}: the range {span!r} runs backwards")
        else:
            start = _value(span, low, high, names, field)
            end = high if _ else start  # `5/15`: from 5 to the end, as cron v3 reads it
        values |= set(range(start, end + 1, step))
    return values, star


def problem(schedule: str) -> str | None:
    """Why Kubernetes (or, for a schedule that never fires, this check) refuses `schedule`, else None."""
    text = schedule.strip()  # the API server splits on spaces, so it accepts them around the fields too
    if not text:
        return "not empty"
    if text.startswith(("TZ=", "CRON_TZ=")):
        return "no TZ= or CRON_TZ= prefix (a CronJob takes spec.timeZone; this stack runs in UTC)"
    if text.startswith("@"):
        if text in DESCRIPTORS:
            return None
        every = text.removeprefix("@every ")
        if every != text and _DURATION.fullmatch(every):
            # the API server takes a zero duration; cron v3 then runs it every second
            if any(c != "0" for c in re.sub(r"\D", "", every)):
                return None
            return "it would never pause: @every 0 runs continuously"
        return f"an unknown descriptor; expected one of {', '.join(DESCRIPTORS)} or @every <duration> (e.g. @every 6h)"
    parts = text.split()
    if len(parts) != 5:
        return f"5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
    try:
        fields = [_field(p, low, high, names, name) for p, (name, low, high, names) in zip(parts, FIELDS, strict=True)]
    except CronError as exc:
        return str(exc)
    (dom, dom_star), (months, _), (_, dow_star) = fields[2], fields[3], fields[4]
    # cron v3: a day matches on day-of-month AND day-of-week when either is a star, else on either
    if not dom_star and dow_star and not any(d <= DAYS_IN_MONTH[m - 1] for m in months for d in dom):
        return "it can never fire: no chosen month has the chosen day of month"
    return None


_AS_FIELDS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
              "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_YEARS = 8  # two leap cycles: a schedule on February 29 shows its four-year gap


def longest_gap_seconds(schedule: str) -> int:
    """The longest time between two runs of a schedule `problem` accepts (UTC, as the stack's CronJob):
    what an alert for a missing run must wait for (components/fabric/certifier_alerts.py)."""
    text = _AS_FIELDS.get(schedule.strip(), schedule.strip())
    if text.startswith("@every "):
        return int(sum(float(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)",
                                                                            text)))
    (minutes, _), (hours, _), (dom, dom_star), (months, _), (dow, dow_star) = (
        _field(p, low, high, names, name) for p, (name, low, high, names) in zip(text.split(), FIELDS, strict=True))
    offsets = sorted(h * 3600 + m * 60 for h in hours for m in minutes)  # the runs of a day that matches
    within = max((b - a for a, b in zip(offsets, offsets[1:], strict=False)), default=0)
    longest, last = within, None
    day = datetime.date(2024, 1, 1)
    for _ in range(_YEARS * 366):
        on_dom, on_dow = day.day in dom, (day.weekday() + 1) % 7 in dow
        if day.month in months and ((on_dom and on_dow) if dom_star or dow_star else (on_dom or on_dow)):
            start = (day - datetime.date(2024, 1, 1)).days * 86400
            if last is not None:
                longest = max(longest, start + offsets[0] - last)
            last = start + offsets[-1]
        day += datetime.timedelta(days=1)
    return longest
