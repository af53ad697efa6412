"""Dask and distributed: every worker process reads and writes through zarrbuf.

zarr-python's configuration is per process. Worker processes started by
``distributed`` get it either from the environment (``ZARR_CODEC_PIPELINE__PATH``, set
before the cluster starts; :func:`pipeline_environ` gives the mapping) or, for a cluster
already running, from :class:`ZarrbufPipelinePlugin`, a worker plugin that sets it in
every worker, present and future::

    from distributed import Client, LocalCluster
    import zarrbuf.dask

    client = Client(LocalCluster(n_workers=2, processes=True))
    zarrbuf.dask.use_zarrbuf_pipeline(client)

Arrays opened with the pipeline carry it when they are pickled to the workers, so the
plugin matters for arrays the workers open themselves; it also makes the setting visible
(``client.run(zarrbuf.dask.worker_stats)`` says how many batches each worker read or wrote
through zarrbuf and how many fell back to zarr-python's pipeline).
"""

from __future__ import annotations

import os
from typing import Any

PIPELINE = "zarrbuf.ZarrbufCodecPipeline"
ENV = "ZARR_CODEC_PIPELINE__PATH"

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as e:  # pragma: no cover - exercised only without distributed
    raise ImportError(
        "zarrbuf.dask needs the 'distributed' package (pip install 'dask[array]' distributed)"
    ) from e

__all__ = [
    "PIPELINE",
    "ZarrbufPipelinePlugin",
    "pipeline_environ",
    "use_zarrbuf_pipeline",
    "worker_stats",
]


def pipeline_environ() -> dict[str, str]:
    """The environment that makes zarr-python in a new process use zarrbuf's pipeline."""
    return {ENV: PIPELINE}


def _configure() -> None:
    os.environ[ENV] = PIPELINE  # for processes this one starts, and config.reset()
    import zarr

    import zarrbuf.pipeline  # noqa: F401  (registers the pipeline)

    zarr.config.set({"codec_pipeline.path": PIPELINE})


class ZarrbufPipelinePlugin(WorkerPlugin):
    """Sets ``codec_pipeline.path`` to zarrbuf's pipeline in every worker process."""

    name = "zarrbuf-codec-pipeline"

    def setup(self, worker: Any) -> None:
        _configure()


def use_zarrbuf_pipeline(client: Any) -> None:
    """Registers :class:`ZarrbufPipelinePlugin` on ``client``'s cluster (and configures this
    process too)."""
    _configure()
    client.register_plugin(ZarrbufPipelinePlugin())


def worker_stats() -> dict[str, Any]:
    """This process's pipeline setting, batch counts and the reasons of its fallbacks (run it
    on workers with ``client.run(worker_stats)``)."""
    import zarr

    import zarrbuf.pipeline as zp

    return {
        "pipeline": zarr.config.get("codec_pipeline.path"),
        **zp.STATS,
        "reasons": dict(zp.STATS_REASONS),
    }
