"""The names of the query side, defined once: retrieval modes and document rankings."""

from typing import Literal, get_args

Mode = Literal["dense", "bm25", "hybrid"]
Ranking = Literal["max", "topm", "mean", "blend"]
FusionMethod = Literal["convex", "ceiling", "rrf"]
MODES: tuple[Mode, ...] = get_args(Mode)
RANKINGS: tuple[Ranking, ...] = get_args(Ranking)
