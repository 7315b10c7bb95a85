"""Reading the last update's record of what it installed (the output ``deployedVersions``): one entry by name."""

from typing import Mapping, Optional


def recorded_entry(recorded: Optional[Mapping[str, object]], name: str) -> Optional[str]:
    """The record's text for ``name``; ``None`` where there is no record, no such entry, or an empty one (an update
    by an earlier version of this project)."""
    value = recorded.get(name) if isinstance(recorded, Mapping) else None
    return value if isinstance(value, str) and value else None
