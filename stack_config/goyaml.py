"""The values a stack file holds, typed as the Pulumi CLI types them, and the strings it hands the program.

The CLI reads a stack file with gopkg.in/yaml.v3 (resolve.go: how a plain scalar becomes a bool, int,
float, null, timestamp or string) into its config objects (sdk/go/common/resource/config/object.go: a
number is written as Go's encoding/json writes it, a timestamp as Go's time.Time.String(), a non-string
mapping key as fmt's %v). `resolve` and `cli_string` follow that code; e2e/tests/test_stack_file.py holds
them to the CLI's own loaders, built from the Pulumi SDK (e2e/tools/pulumi).

So `created: 2026-01-01` reaches the program as "2026-01-01 00:00:00 +0000 UTC", `0x10` as "16", `1.0`
inside an object as 1, and `.inf` is refused (JSON cannot hold it).
"""

from __future__ import annotations

import calendar
import json
import math
import re
from decimal import Decimal
from typing import Any

STR, BOOL, INT, FLOAT, NULL, TIMESTAMP = (f"tag:yaml.org,2002:{t}" for t in
                                          ("str", "bool", "int", "float", "null", "timestamp"))
_RESOLVABLE = {"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}
_MAP = {**dict.fromkeys(("true", "True", "TRUE"), (BOOL, True)),
        **dict.fromkeys(("false", "False", "FALSE"), (BOOL, False)),
        **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
        **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
        **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
        **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf))}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# yaml.v3's timestamp layouts (allowedTimestampFormats), as Go's time.Parse reads them: one- or two-digit
# fields, a fraction after the seconds, a zone of Z or ±hh:mm where the layout has one.
_TIME = r"(\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,](\d+))?"
_TIMESTAMPS = (re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})[Tt]" + _TIME + r"(Z|[+-]\d\d:\d\d)"),
               re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2}) " + _TIME + "()"),
               re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})()()()()()"))
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_UINT64 = (0, 2 ** 64 - 1)


class CannotDecode(ValueError):
    """yaml.v3's "cannot decode !!str `yes` as a !!bool": an explicit tag its value does not fit."""


def resolve(tag: str, text: str) -> Any:
    """The value of a scalar as yaml.v3 decodes it into an untyped value (`tag` "" for a plain scalar)."""
    if tag not in _RESOLVABLE:
        return text
    rtag, value = _resolve(tag, text)
    if tag in ("", rtag, STR):
        return value
    if tag == FLOAT and rtag == INT:
        return float(value)
    raise CannotDecode(f"cannot decode !!{rtag.rsplit(':', 1)[1]} `{text}` as a !!{tag.rsplit(':', 1)[1]}")


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    hint = "N" if not text else ("S" if text[0] in "+-" else "D" if text[0].isdigit() and text[0].isascii()
                                  else "M" if text[0] in "yYnNtTfFoO~" else "." if text[0] == "." else "")
    if not hint or tag == STR:
        return STR, text
    if text in _MAP:
        return _MAP[text]
    if hint == ".":
        value = _parse_float(text)
        return (FLOAT, value) if value is not None else (STR, text)
    if hint not in "DS":
        return STR, text
    if tag in ("", TIMESTAMP) and (stamp := _timestamp(text)) is not None:
        return TIMESTAMP, stamp
    plain = text.replace("_", "")
    for parse in (lambda: _parse_int(plain, 0, _INT64), lambda: _parse_int(plain, 0, _UINT64, signed=False),
                  lambda: _parse_float(plain) if _YAML_STYLE_FLOAT.fullmatch(plain) else None):
        if (value := parse()) is not None:
            return (FLOAT if isinstance(value, float) else INT), value
    for prefix, base in (("0b", 2), ("0o", 8)):
        if plain.startswith(prefix):
            value = _parse_int(plain[2:], base, _INT64)
            value = value if value is not None else _parse_int(plain[2:], base, _UINT64, signed=False)
        elif plain.startswith("-" + prefix):
            value = _parse_int("-" + plain[3:], base, _INT64)
        else:
            continue
        if value is not None:
            return INT, value
    return STR, text


def _parse_int(text: str, base: int, bounds: tuple[int, int], signed: bool = True) -> int | None:
    """Go's strconv.ParseInt / ParseUint: base 0 reads a 0x, 0o, 0b or bare 0 (octal) prefix."""
    sign, digits = 1, text
    if signed and digits[:1] in ("+", "-"):
        sign, digits = (-1 if digits[0] == "-" else 1), digits[1:]
    if not digits:
        return None
    if base == 0:
        base = 10
        if digits[0] == "0":
            prefix = digits[1:2].lower()
            if len(digits) >= 3 and prefix in ("b", "o", "x"):
                base, digits = {"b": 2, "o": 8, "x": 16}[prefix], digits[2:]
            else:
                base, digits = 8, digits[1:] or "0"  # "0" itself
    if not all(c.isascii() and c.isalnum() and int(c, 36) < base for c in digits):
        return None
    value = sign * int(digits, base)
    return value if bounds[0] <= value <= bounds[1] else None


def _parse_float(text: str) -> float | None:
    """Go's strconv.ParseFloat, where a YAML scalar can reach it: None for what it refuses or overflows."""
    if any(c not in "0123456789+-.eE_" for c in text):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isinf(value) else value


def _timestamp(text: str) -> str | None:
    """time.Time.String() of the timestamp yaml.v3 reads in `text`, or None where it reads none. A zone of
    +00:00 is named UTC: the CLI names it after the machine's local zone, UTC on CI and in containers."""
    if not (len(text) > 4 and text[:4].isdigit() and text[4] == "-"):
        return None
    for layout in _TIMESTAMPS:
        if m := layout.fullmatch(text):
            year, month, day, hour, minute, second = (int(g or 0) for g in m.groups()[:6])
            fraction, zone = m.group(7) or "", m.group(8)
            if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year or 2000, month)[1]
                    and hour < 24 and minute < 60 and second < 60):
                continue
            offset = 0
            if zone and zone != "Z":
                hh, mm = int(zone[1:3]), int(zone[4:6])
                if hh > 24 or mm > 60:
                    continue
                offset = (1 if zone[0] == "+" else -1) * (hh * 60 + mm)
            nanos = fraction[:9].ljust(9, "0").rstrip("0")
            sign = "-" if offset < 0 else "+"
            numeric = f"{sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
            return (f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
                    f"{'.' + nanos if nanos else ''} {numeric} {'UTC' if offset == 0 else numeric}")
    return None


def cli_string(value: Any) -> str:
    """The string the CLI hands the program for a top-level value: text as it is, anything else as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else go_json(value)


def go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes the CLI's config object (numbers as Go writes a float64 or int)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_quote(k)}:{go_json(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float):
        return _json_float(value)
    return _quote(value) if isinstance(value, str) else str(value)


def _quote(text: str) -> str:
    return json.dumps(text)  # escapes differ from Go's (<, >, &), the decoded text does not


def _json_float(x: float) -> str:
    """encoding/json's float64: %f between 1e-6 and 1e21, else %e with a one-digit exponent kept short."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"json: unsupported value: {x}")
    if x == 0:
        return "0"  # -0 too: the CLI writes the file back as YAML and reads it again, and "-0" is an integer
    if 1e-6 <= abs(x) < 1e21:
        text = format(Decimal(repr(x)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return re.sub(r"e-0(\d)$", r"e-\1", repr(x))


def go_key(key: Any) -> str:
    """A mapping key inside a config object, as fmt's %v writes it (the CLI's object keys are strings)."""
    if isinstance(key, str):
        return key
    if key is None:
        return "<nil>"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return _v_float(key)
    return str(key)


def _v_float(x: float) -> str:
    """fmt's %v of a float64 (strconv's 'g', shortest): %e where the exponent is below -4 or 6 and over."""
    if math.isinf(x) or math.isnan(x):
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(x, "NaN")
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    exp = len(digits) + exponent - 1
    if exp < -4 or exp >= 6:
        mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return format(Decimal(repr(x)).normalize(), "f")


def go_values(value: Any) -> Any:
    """A config value with every nested mapping key as the CLI writes it (go_key)."""
    if isinstance(value, dict):
        return {go_key(k): go_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [go_values(v) for v in value]
    return value
