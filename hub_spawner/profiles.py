"""The profile list: what a notebook may ask for, shown as a form and checked again when it comes back.

A profile names one flavour and how many of its units (slices, or whole GPUs) one notebook gets. The form is only
a convenience: ``choose_profile`` is the check that counts, because ``user_options`` also arrive through the
hub's REST API, where anyone can send anything.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from scheduler_core.model import FLAVOURS


class ProfileError(ValueError):
    """A profile list or a user's choice is invalid; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Profile:
    slug: str
    display_name: str
    flavour: str
    units: int = 1
    description: str = ""
    default: bool = False

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> Profile:
        """One entry of ``ShoalSpawner.profile_list``, as an operator writes it in ``jupyterhub_config.py``."""
        known = {"slug", "display_name", "flavour", "units", "description", "default"}
        extra = sorted(set(raw) - known)
        if extra:
            raise ProfileError(f"profile {raw.get('slug', '?')!r}: unknown keys {extra}; use {sorted(known)}")
        try:
            slug = str(raw["slug"])
            flavour = str(raw["flavour"])
        except KeyError as exc:
            raise ProfileError(f"profile {dict(raw)!r} lacks {exc.args[0]!r}") from None
        if flavour not in FLAVOURS:
            raise ProfileError(f"profile {slug!r}: unknown flavour {flavour!r}; known: {', '.join(FLAVOURS)}")
        units = int(raw.get("units", 1))
        if units < 1:
            raise ProfileError(f"profile {slug!r}: units must be at least 1, got {units}")
        return cls(slug=slug, display_name=str(raw.get("display_name", slug)), flavour=flavour, units=units,
                   description=str(raw.get("description", "")), default=bool(raw.get("default", False)))


#: 1g.10gb by default; the larger slices and a whole H100 for those who need them.
DEFAULT_PROFILES: tuple[dict[str, Any], ...] = (
    {"slug": "mig-1g", "display_name": "1g.10gb MIG slice", "flavour": "h100-mig-1g", "default": True,
     "description": "1/7 of an H100, 10 GB of GPU memory: exploration, small models."},
    {"slug": "mig-2g", "display_name": "2g.20gb MIG slice", "flavour": "h100-mig-2g",
     "description": "2/7 of an H100, 20 GB of GPU memory."},
    {"slug": "mig-3g", "display_name": "3g.40gb MIG slice", "flavour": "h100-mig-3g",
     "description": "3/7 of an H100, 40 GB of GPU memory: fine-tuning small models."},
    {"slug": "h100", "display_name": "Whole H100", "flavour": "h100",
     "description": "One whole H100, 80 GB. Counts against your team's H100 quota."},
)


def load_profiles(raw: Iterable[Mapping[str, Any]]) -> list[Profile]:
    """Parse and check a profile list: unique slugs, at most one default (the first one if none is marked)."""
    profiles = [Profile.from_config(entry) for entry in raw]
    if not profiles:
        raise ProfileError("the profile list is empty; offer at least one profile")
    slugs = [p.slug for p in profiles]
    duplicates = sorted({s for s in slugs if slugs.count(s) > 1})
    if duplicates:
        raise ProfileError(f"profile slugs must be unique; repeated: {duplicates}")
    defaults = [p.slug for p in profiles if p.default]
    if len(defaults) > 1:
        raise ProfileError(f"only one profile may be the default; marked: {defaults}")
    return profiles


def default_profile(profiles: Sequence[Profile]) -> Profile:
    return next((p for p in profiles if p.default), profiles[0])


def choose_profile(profiles: Sequence[Profile], user_options: Mapping[str, Any]) -> Profile:
    """The profile ``user_options`` asks for (the default when it names none); anything else is refused."""
    slug = user_options.get("profile")
    if isinstance(slug, list) and len(slug) == 1:  # raw form data, if options_from_form was bypassed
        slug = slug[0]
    if slug in (None, ""):
        return default_profile(profiles)
    for profile in profiles:
        if profile.slug == slug:
            return profile
    raise ProfileError(f"unknown profile {slug!r}; choose one of: {', '.join(p.slug for p in profiles)}")


def options_from_form(form_data: Mapping[str, list[str]]) -> dict[str, str]:
    """Form fields arrive as lists of strings; keep only what the form offers (the choice is checked later)."""
    options: dict[str, str] = {}
    for key in ("profile", "team"):
        values = form_data.get(key) or []
        if values:
            options[key] = str(values[0])
    return options


def render_form(profiles: Sequence[Profile], *, teams: Sequence[str] = (), notice: str = "") -> str:
    """The spawn page's form: one radio button per profile, a team choice when the user has several teams,
    and ``notice`` (why the last server stopped) above them."""
    chosen = default_profile(profiles)
    parts: list[str] = []
    if notice:
        parts.append(f'<div class="alert alert-info" id="shoal-notice">{html.escape(notice)}</div>')
    parts.append('<fieldset id="shoal-profiles"><legend>GPU for this notebook</legend>')
    for profile in profiles:
        checked = " checked" if profile is chosen else ""
        pid = f"profile-{html.escape(profile.slug)}"
        parts.append(
            f'<div class="form-check"><input class="form-check-input" type="radio" name="profile" id="{pid}" '
            f'value="{html.escape(profile.slug)}"{checked}>'
            f'<label class="form-check-label" for="{pid}"><strong>{html.escape(profile.display_name)}</strong>'
            f' <small class="text-muted">{html.escape(profile.description)}</small></label></div>')
    parts.append("</fieldset>")
    if len(teams) > 1:
        options = "".join(f'<option value="{html.escape(t)}">{html.escape(t)}</option>' for t in teams)
        parts.append(f'<label for="shoal-team">Team</label><select class="form-select" name="team" '
                     f'id="shoal-team">{options}</select>')
    return "\n".join(parts)
