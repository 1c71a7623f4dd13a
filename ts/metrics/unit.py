"""Short unit names accepted by the metrics API and the names they are reported as."""

UNITS = {
    "ms": "Milliseconds",
    "s": "Seconds",
    "percent": "Percent",
    "count": "Count",
    "MB": "Megabytes",
    "GB": "Gigabytes",
    "kB": "Kilobytes",
    "B": "Bytes",
    "": "unit",
}


class Units:
    units = UNITS


def normalise_unit(unit: str) -> str:
    return UNITS.get(unit, unit)
