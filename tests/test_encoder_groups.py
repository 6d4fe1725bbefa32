"""The indexer hands the encoder groups of its own whole batches: no short batch at each group's end."""

import random
from types import SimpleNamespace

from lodex.indexer import pipeline
from lodex.indexer.pipeline import Indexer
from tests.fakes import FakeEncoder


def test_groups_are_whole_encoder_batches() -> None:
    rng = random.Random(7)
    encoder = FakeEncoder()
    for group_tokens in (0, 3 * encoder.batch_tokens):
        encoder.group_tokens = group_tokens
        jobs = [SimpleNamespace(length=rng.randint(3, 130)) for _ in range(500)]
        batches = [[jobs[i] for i in batch] for batch in encoder.plan_batches([job.length for job in jobs])]
        groups = list(Indexer._groups(SimpleNamespace(encoder=encoder), jobs))  # type: ignore[arg-type]
        assert [job for group in groups for job in group] == [job for batch in batches for job in batch]  # all, in order
        starts = {id(batch[0]) for batch in batches}
        assert all(id(group[0]) in starts for group in groups)  # each group begins a batch, so it ends one too
        assert len(groups) < len(batches)  # several batches a group
        for group in groups[:-1]:
            assert sum(1 for job in group if id(job) in starts) >= pipeline.GROUP_BATCHES
            assert sum(len(b) * b[0].length for b in batches if id(b[0]) in {id(j) for j in group}) >= group_tokens
