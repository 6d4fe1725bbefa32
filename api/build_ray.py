"""The indexer of `lodex index --ray`, built from settings: files read, chunked and encoded on Ray actors, each with its own encoder."""

from collections.abc import Callable
from functools import partial

from lodex.api.index_policy import scan_rules
from lodex.api.settings import Settings
from lodex.encoders.encoder import Encoder
from lodex.indexer.chunking.chunker import Chunker
from lodex.indexer.chunking.late_chunking import LateChunking
from lodex.indexer.pipeline import Indexer
from lodex.store.base import Store
from lodex.store.job_log import JobLog


def ray_indexer(
    settings: Settings,
    encoder: Encoder,
    store: Store,
    chunker: Chunker,
    late: LateChunking | None,
    jobs: JobLog | None,
    whole_vector: int,
    unread: frozenset[str],
    actor_encoder: Callable[[Settings], Encoder],
) -> Indexer:
    """`lodex index --ray`: the indexer whose files are read, chunked and encoded on Ray; each actor builds its encoder
    with `actor_encoder` from these settings (the index's manifest bound in it), its model on index.ray_cpus_per_actor
    threads (unless encoder.threads says)."""
    from lodex.indexer.ray_engine import RayIndexer

    threads = settings.encoder.threads or max(1, round(settings.index.ray_cpus_per_actor))
    on_actor = settings.model_copy(update={"encoder": settings.encoder.model_copy(update={"threads": threads})})
    make_encoder = partial(actor_encoder, on_actor)
    return RayIndexer(
        store,
        encoder,
        chunker,
        scan_rules(settings),
        settings.index,
        make_encoder,
        jobs=jobs,
        title_prefix=settings.chunking.title_prefix,
        late=late,
        whole_vector=whole_vector,
        unread=unread,
    )
