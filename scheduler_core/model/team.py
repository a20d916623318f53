"""Teams, their cohorts and their per-flavour quotas (Kueue's ClusterQueue, in a page of YAML)."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .flavours import FLAVOURS

TeamName = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$")]


class Quota(BaseModel):
    """A team's share of one flavour, in that flavour's units.

    ``borrowing_limit``: how far above nominal the team may go on others' idle quota (``None``: no limit).
    ``lending_limit``: how much of its unused nominal others may borrow (``None``: all of it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    nominal: int = Field(ge=0)
    borrowing_limit: int | None = Field(default=None, ge=0)
    lending_limit: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _lend_within_nominal(self) -> Self:
        if self.lending_limit is not None and self.lending_limit > self.nominal:
            raise ValueError(f"lending_limit {self.lending_limit} exceeds nominal {self.nominal}")
        return self


class TeamConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: TeamName
    cohort: TeamName
    weight: float = Field(default=1.0, gt=0, description="fair-share weight: twice the weight, twice the share")
    quotas: dict[str, Quota] = Field(default_factory=dict)

    @field_validator("quotas")
    @classmethod
    def _known_flavours(cls, quotas: dict[str, Quota]) -> dict[str, Quota]:
        for flavour in quotas:
            if flavour not in FLAVOURS:
                raise ValueError(f"unknown flavour {flavour!r}; known flavours: {', '.join(FLAVOURS)}")
        return quotas


class TeamsConfig(BaseModel):
    """All teams, as written in ``deploy/teams/NAME.yaml``."""

    model_config = ConfigDict(extra="forbid")

    teams: list[TeamConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        seen: set[str] = set()
        for team in self.teams:
            if team.name in seen:
                raise ValueError(f"team {team.name!r} is defined twice")
            seen.add(team.name)
        return self

    def by_name(self) -> dict[str, TeamConfig]:
        return {team.name: team for team in self.teams}

    def nominal_by_flavour(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for team in self.teams:
            for flavour, quota in team.quotas.items():
                total[flavour] = total.get(flavour, 0) + quota.nominal
        return total
