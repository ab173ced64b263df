"""FaissStore on directories under tmp_path: what only the FAISS backend does (the per-directory
lock, its files, persistence and crash safety, lazy BM25, the three index types, GPU use),
and the acceptance test: FAISS `flat` and Milvus (`FLAT`) rank the same data identically,
dense and BM25. The behaviours every backend shares are in test_backend_contract.py."""

from __future__ import annotations

import math
import os
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

import faiss

from services.retriever.backends.base import ChunkRecord, ScoredChunk
from services.retriever.backends.faiss import FaissStore
from services.retriever.backends.faiss import table as faiss_table
from services.retriever.filters import parse_filter
from shared.errors import FailedPrecondition, ResourceExhausted, Unavailable
from tests.retriever.stores import (
    DIM,
    concurrent_writes_and_searches,
    ids,
    make_chunk,
    run_in_new_process,
    six_chunks,
    unit,
)

INDEX_TYPES = ["flat", "hnsw", "ivf"]


@pytest.fixture
def backend() -> str:
    """Only FAISS here: the `store`, `docs` and `location` fixtures of conftest.py open it."""
    return "faiss"


@pytest.fixture
def faiss_dir(location: str) -> str:
    return location


def index_files(directory: str, collection: str = "docs") -> list[str]:
    return sorted(p.name for p in (Path(directory) / collection).glob("index-*.faiss"))


# -- collections -----------------------------------------------------------------------


def test_a_collection_is_a_folder_next_to_the_lock(store: FaissStore, faiss_dir: str) -> None:
    store.create_collection("papers", DIM)
    store.create_collection("abstracts", 8)
    assert sorted(os.listdir(faiss_dir)) == ["LOCK", "abstracts", "papers"]
    store.delete_collection("papers")
    assert sorted(os.listdir(faiss_dir)) == ["LOCK", "abstracts"]


# -- search ----------------------------------------------------------------------------


def test_bm25_index_is_rebuilt_lazily_after_writes(docs: FaissStore) -> None:
    docs.sparse_search("docs", "graphene", 5, None)
    builds = docs.bm25_builds
    docs.sparse_search("docs", "folding", 5, None)
    assert docs.bm25_builds == builds  # no write, no rebuild
    docs.upsert("docs", [make_chunk("z", 0, "zeppelin airships")])
    docs.upsert("docs", [make_chunk("z", 1, "more zeppelin airships")])
    assert docs.bm25_builds == builds  # writes do not rebuild...
    assert ids(docs.sparse_search("docs", "zeppelin", 5, None)) == ["z:0", "z:1"]
    assert docs.bm25_builds == builds + 1  # ...the next search does, once


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_selective_filters_search_deep_enough(tmp_path: Path, index_type: str) -> None:
    """Only the 5 chunks least like the query match: progressive deepening must reach them,
    and return them in the exact order, on every index type."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((400, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[0]
    order = np.argsort(-(vectors @ query), kind="stable")
    rare = {int(i) for i in order[-5:]}
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=4)
    try:
        s.create_collection("docs", 16)
        s.upsert(
            "docs",
            [
                make_chunk("d", i, f"text {i}", vectors[i].tolist(), {"rare": i in rare})
                for i in range(400)
            ],
        )
        hits = s.dense_search("docs", query.tolist(), 3, parse_filter({"rare": True}))
        assert ids(hits) == [f"d:{int(i)}" for i in order[-5:][:3]]
        every = s.dense_search("docs", query.tolist(), 10, parse_filter({"rare": True}))
        assert ids(every) == [f"d:{int(i)}" for i in order[-5:]]  # fewer than k: all there are
        sparse = s.sparse_search("docs", "text", 10, parse_filter({"rare": True}))
        assert {h.chunk.id for h in sparse} == {f"d:{i}" for i in rare}
    finally:
        s.close()


# -- index types -----------------------------------------------------------------------


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around a few centres, as embeddings of a few topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, dim))
    x = centres[rng.integers(0, 8, n)] + 0.6 * rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_index_types_find_the_true_neighbours(tmp_path: Path, index_type: str) -> None:
    vectors = clustered(600, 32, seed=1)
    queries = clustered(20, 32, seed=2)
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=8, ivf_nprobe=4)
    try:
        s.create_collection("docs", 32)
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in enumerate(vectors)])
        found = 0
        for q in queries:
            truth = {f"d:{int(i)}" for i in np.argsort(-(vectors @ q))[:10]}
            hits = s.dense_search("docs", q.tolist(), 10, None)
            assert len(hits) == 10
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            found += len(truth & set(ids(hits)))
            if index_type == "flat":
                assert set(ids(hits)) == truth
                assert hits[0].score == pytest.approx(float(np.max(vectors @ q)), abs=1e-5)
        assert found / (10 * len(queries)) >= 0.9
        index = s._collections["docs"].index
        expected = {"flat": faiss.IndexIDMap2, "hnsw": faiss.IndexIDMap2, "ivf": faiss.IndexIVFFlat}
        assert isinstance(index, expected[index_type])
    finally:
        s.close()


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_deletes_and_replacements_on_every_index_type(tmp_path: Path, index_type: str) -> None:
    vectors = clustered(400, 16, seed=4)
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=4)
    try:
        s.create_collection("docs", 16)
        s.upsert("docs", [make_chunk(f"doc{i % 40}", i, vector=v.tolist()) for i, v in
                          enumerate(vectors)])  # fmt: skip
        assert len(s.dense_search("docs", vectors[0].tolist(), 5, None)) == 5
        builds = s.index_builds
        s.delete_documents("docs", ["doc0"])  # chunks 0, 40, 80, ...
        # chunk 1 now points where chunk 0 was
        s.upsert("docs", [make_chunk("doc1", 1, vector=vectors[0].tolist())])
        if index_type == "hnsw":
            assert s.index_builds == builds  # marked dirty, not rebuilt yet
        hits = s.dense_search("docs", vectors[0].tolist(), 10, None)
        assert hits[0].chunk.id == "doc1:1" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert not any(h.chunk.document_id == "doc0" for h in hits)
        assert s.index_builds == builds + (1 if index_type == "hnsw" else 0)
        assert s.count("docs") == (390, 39)
        assert s._collections["docs"].index.ntotal == 390
    finally:
        s.close()


def test_ivf_is_flat_until_it_has_enough_vectors_to_train(tmp_path: Path) -> None:
    s = FaissStore(str(tmp_path / "ivf"), index_type="ivf", ivf_nlist=4)  # trains at 156
    try:
        s.create_collection("docs", 16)
        vectors = clustered(200, 16, seed=5)
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in
                          enumerate(vectors[:100])])  # fmt: skip
        s.dense_search("docs", vectors[0].tolist(), 1, None)
        assert isinstance(s._collections["docs"].index, faiss.IndexIDMap2)  # exact fallback
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in
                          enumerate(vectors) if i >= 100])  # fmt: skip
        assert s.dense_search("docs", vectors[150].tolist(), 1, None)[0].chunk.id == "d:150"
        index = s._collections["docs"].index
        assert isinstance(index, faiss.IndexIVFFlat) and index.is_trained
        assert index.ntotal == 200 and index.nprobe == 4
    finally:
        s.close()


# -- persistence -----------------------------------------------------------------------


def test_index_is_saved_on_close_and_read_on_reopen(docs: FaissStore, faiss_dir: str) -> None:
    docs.close()
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]  # saved on close
    again = FaissStore(faiss_dir)
    try:
        assert again.dense_search("docs", unit(0, 0, 0, 1), 1, None)[0].chunk.id == "c:0"
        assert (again.index_loads, again.index_builds) == (1, 0)  # read, not rebuilt
    finally:
        again.close()


def test_one_process_per_directory(docs: FaissStore, faiss_dir: str) -> None:
    # Another process is refused too (test_backend_contract.py); so is a second store here.
    assert (Path(faiss_dir) / "LOCK").is_file()
    with pytest.raises(Unavailable, match="only one process") as err:
        FaissStore(faiss_dir)
    assert str(os.getpid()) in err.value.message and faiss_dir in err.value.message
    assert docs.count("docs") == (6, 3)  # the holder is unaffected


def test_index_file_is_written_after_writes_when_due(faiss_dir: str) -> None:
    s = FaissStore(faiss_dir, save_interval_s=0)
    try:
        s.create_collection("docs", DIM)
        s.upsert("docs", six_chunks()[:3])
        s.dense_search("docs", unit(1, 0, 0, 0), 1, None)  # builds, then saves
        s.upsert("docs", six_chunks()[3:])  # applied in place, saved again
        assert index_files(faiss_dir) == ["index-flat-g2.faiss"]  # older generations removed
        assert not [p for p in (Path(faiss_dir) / "docs").iterdir() if p.name.endswith(".tmp")]
    finally:
        s.close()


def test_changing_the_index_type_rebuilds(docs: FaissStore, faiss_dir: str) -> None:
    docs.close()
    hnsw = FaissStore(faiss_dir, index_type="hnsw")
    try:
        assert hnsw.dense_search("docs", unit(0, 0, 0, 1), 1, None)[0].chunk.id == "c:0"
        assert (hnsw.index_loads, hnsw.index_builds) == (0, 1)
    finally:
        hnsw.close()
    assert index_files(faiss_dir) == ["index-hnsw32-g1.faiss"]


# -- crash safety ----------------------------------------------------------------------


def crash_after_writes(faiss_dir: str) -> None:
    """Another process commits writes, searches (so its index is current in memory), and
    dies without closing: the index file on disk stays at the older generation (the long
    save interval keeps that process from writing it after its writes)."""
    run_in_new_process(
        "import json, os\n"
        "from services.retriever.backends.faiss import FaissStore\n"
        "from services.retriever.backends.base import ChunkRecord\n"
        f"s = FaissStore({faiss_dir!r}, save_interval_s=3600)\n"
        "s.upsert('docs', [ChunkRecord('n:0', 'n', 'nebula dust', [0.0, 0.0, 1.0, 1.0], "
        "{}, 'n.txt', 0)])\n"
        "s.delete_documents('docs', ['c'])\n"
        "s.dense_search('docs', [0.0, 0.0, 1.0, 1.0], 1, None)\n"
        "print(json.dumps({}), flush=True)\n"
        "os._exit(0)\n"
    )


def assert_state_after_crash(s: FaissStore) -> None:
    assert s.count("docs") == (6, 3)
    hits = s.dense_search("docs", unit(0, 0, 1, 1), 10, None)
    assert hits[0].chunk.id == "n:0" and "c:0" not in ids(hits)
    assert len(hits) == 6
    assert ids(s.sparse_search("docs", "nebula", 5, None)) == ["n:0"]
    assert s.sparse_search("docs", "quantum", 5, None) == []


def test_crash_between_database_commit_and_index_write(docs: FaissStore, faiss_dir: str) -> None:
    docs.close()
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]
    crash_after_writes(faiss_dir)
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]  # stale: the DB is at g3
    s = FaissStore(faiss_dir)
    try:
        assert_state_after_crash(s)
        assert (s.index_loads, s.index_builds) == (0, 1)
    finally:
        s.close()
    assert index_files(faiss_dir) == ["index-flat-g3.faiss"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "stale_renamed", "missing", "temp"])
def test_damaged_or_missing_index_file_is_rebuilt(
    docs: FaissStore, faiss_dir: str, damage: str
) -> None:
    docs.close()
    crash_after_writes(faiss_dir)
    folder = Path(faiss_dir) / "docs"
    old = folder / "index-flat-g1.faiss"
    current = folder / "index-flat-g3.faiss"
    if damage == "garbage":
        current.write_bytes(b"not a faiss index" * 100)
    elif damage == "truncated":
        current.write_bytes(old.read_bytes()[: old.stat().st_size // 2])
    elif damage == "stale_renamed":
        old.rename(current)  # right name, wrong contents (6 vectors, one of them deleted)
    elif damage == "missing":
        old.unlink()
    else:  # a crash while writing the new file left its temporary behind
        (folder / ".index-flat-g3.faiss.0123.tmp").write_bytes(old.read_bytes()[:100])
    s = FaissStore(faiss_dir)
    try:
        assert_state_after_crash(s)
        assert s.index_builds == 1
    finally:
        s.close()
    assert sorted(p.name for p in folder.iterdir()) == ["chunks.sqlite", "index-flat-g3.faiss"]


def test_crash_while_creating_or_deleting_a_collection_leaves_nothing(faiss_dir: str) -> None:
    Path(faiss_dir).mkdir(parents=True)
    (Path(faiss_dir) / ".creating-half-0a1b").mkdir()
    (Path(faiss_dir) / ".creating-half-0a1b" / "chunks.sqlite").write_bytes(b"partial")
    (Path(faiss_dir) / ".deleting-gone-2c3d").mkdir()
    s = FaissStore(faiss_dir)
    try:
        assert s.list_collections() == []
        assert sorted(os.listdir(faiss_dir)) == ["LOCK"]
    finally:
        s.close()


def test_a_write_that_fails_leaves_nothing_behind(
    docs: FaissStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    coll = docs._collections["docs"]
    generation = coll.generation
    real = faiss_table._set_info

    def full_disk(db: sqlite3.Connection, key: str, value: str) -> None:
        real(db, key, value)
        raise sqlite3.OperationalError("database or disk is full")

    # The rows are inserted, then the transaction fails: all of it is rolled back.
    monkeypatch.setattr(faiss_table, "_set_info", full_disk)
    with pytest.raises(ResourceExhausted, match="no space left"):
        docs.upsert("docs", [make_chunk("new", 0), make_chunk("a", 0, "replaced")])
    with pytest.raises(ResourceExhausted):
        docs.delete_documents("docs", ["b"])
    monkeypatch.undo()
    assert coll.generation == generation and docs.count("docs") == (6, 3)
    assert docs.dense_search("docs", unit(1, 0, 0, 0), 1, None)[0].chunk.text == (
        "Graphene conducts electricity"
    )
    assert len(docs.dense_search("docs", unit(1, 1, 1, 1), 10, None)) == 6


# -- threads ---------------------------------------------------------------------------


def test_concurrent_writes_and_searches_on_hnsw(tmp_path: Path) -> None:
    # The flat index is hammered in test_backend_contract.py.
    s = FaissStore(str(tmp_path / "c"), index_type="hnsw")
    try:
        s.create_collection("docs", DIM)
        s.upsert("docs", six_chunks())
        concurrent_writes_and_searches(s)
    finally:
        s.close()


# -- failures and options --------------------------------------------------------------


def test_gpu_always_without_a_gpu_refuses_to_start(faiss_dir: str) -> None:
    if faiss.get_num_gpus() > 0:
        pytest.skip("faiss sees a GPU here")
    with pytest.raises(FailedPrecondition, match="sees no GPU"):
        FaissStore(faiss_dir, use_gpu="always")
    s = FaissStore(faiss_dir, use_gpu="never")
    s.close()


def test_unwritable_directory_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(Unavailable, match="choose a writable RAGRAIL_RETRIEVER_FAISS_DIR"):
        FaissStore(str(blocker / "faiss"))


# -- parity with Milvus ----------------------------------------------------------------

# Words of a few topics, in several forms so stemming matters, plus stop words; sampled
# with Zipf-like weights into chunks of varied length, so BM25 scores rarely tie.
_TOPICS = {
    "astronomy": "star stars galaxy galaxies orbit orbiting planet planets telescope nebula "
    "comet comets gravity gravitational asteroid rover landing lander mars lunar solar",
    "baking": "bread dough sourdough yeast flour knead kneading oven crust starter rise "
    "rising ferment fermentation loaf loaves butter sugar salt proof proofing",
    "biology": "protein proteins fold folding folded cell cells gene genes enzyme dna "
    "mutation mutations neuron neurons tissue membrane receptor receptors virus bacteria",
    "computing": "network networks neural train training model models gradient tensor gpu "
    "cache caching compile compiler kernel thread threads memory latency index indexing",
    "geology": "glacier glaciers rock rocks erosion sediment volcano volcanic magma mineral "
    "minerals quake earthquake fault faults crust mantle basalt granite melting melt",
}
_STOP = ["the", "of", "and", "a", "to", "in", "is", "it", "that", "with", "for", "on", "by"]


def realistic_corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """(topic, text) pairs: mostly one topic's words, some from others, some stop words."""
    rng = random.Random(seed)
    words = {t: w.split() for t, w in _TOPICS.items()}
    everything = [w for ws in words.values() for w in ws]
    out: list[tuple[str, str]] = []
    for _ in range(n):
        topic = rng.choice(sorted(words))
        own = words[topic]
        weights = [1 / (r + 1) for r in range(len(own))]
        text: list[str] = []
        for _ in range(rng.randint(12, 90)):
            roll = rng.random()
            if roll < 0.25:
                text.append(rng.choice(_STOP))
            elif roll < 0.85:
                text.append(rng.choices(own, weights)[0])
            else:
                text.append(rng.choice(everything))
        text[0] = text[0].capitalize()
        out.append((topic, " ".join(text) + "."))
    return out


def same_ranking(
    name: str, faiss_hits: list[ScoredChunk], milvus_hits: list[ScoredChunk], top: int = 10
) -> int:
    """Asserts the two top-`top` lists are the same ranking; returns how many positions
    differed only by the order of exactly tied scores. Both lists hold up to 3 x top hits,
    so a tie that straddles position `top` is seen whole."""
    assert len(faiss_hits) == len(milvus_hits), name
    reordered = 0
    for i in range(min(top, len(faiss_hits))):
        f, m = faiss_hits[i], milvus_hits[i]
        assert f.score == pytest.approx(m.score, rel=1e-5), (name, i, f.score, m.score)
        if f.chunk.id == m.chunk.id:
            continue
        # Ties are exact within one engine (same inputs, same arithmetic), and each engine
        # breaks them its own way: the ids may differ only inside a group of equal scores.
        f_group = {h.chunk.id for h in faiss_hits if math.isclose(h.score, f.score, rel_tol=1e-9)}
        m_group = {h.chunk.id for h in milvus_hits if math.isclose(h.score, m.score, rel_tol=1e-9)}
        assert len(f_group) > 1 and f_group == m_group, (name, i, f.chunk.id, m.chunk.id)
        reordered += 1
    return reordered


@pytest.fixture(scope="module")
def twin_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FaissStore, Any]]:
    """The same 300 chunks (realistic text, 384-d unit vectors) in FAISS flat and in Milvus
    Lite with a FLAT index."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from services.retriever.backends.milvus import MilvusStore

    root = tmp_path_factory.mktemp("parity")
    corpus = realistic_corpus(300, seed=11)
    vectors = np.random.default_rng(11).standard_normal((300, 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        ChunkRecord(
            id=f"doc{i // 3}:{i % 3}",
            document_id=f"doc{i // 3}",
            text=text,
            vector=vectors[i].tolist(),
            metadata={"topic": topic, "n": i},
            document_name=f"doc{i // 3}.txt",
            chunk_index=i % 3,
        )
        for i, (topic, text) in enumerate(corpus)
    ]
    fs = FaissStore(str(root / "faiss"), index_type="flat")
    ms = MilvusStore(uri=str(root / "milvus.db"), index_type="FLAT")
    try:
        for s in (fs, ms):
            s.create_collection("twin", 384)
            s.upsert("twin", chunks)  # one batch: Milvus Lite keeps one segment, one IDF
        yield fs, ms
    finally:
        fs.close()
        ms.close()


def test_dense_top10_matches_milvus_flat(twin_stores: tuple[FaissStore, Any]) -> None:
    fs, ms = twin_stores
    rng = np.random.default_rng(5)
    stored = np.asarray([h.chunk.vector for h in fs.dense_search(
        "twin", [1.0] * 384, 300, None, include_vectors=True)])  # fmt: skip
    queries = list(rng.standard_normal((15, 384)))
    queries += [stored[i] + 0.5 * rng.standard_normal(384) / math.sqrt(384) for i in range(5)]
    for i, q in enumerate(queries):
        query = (q / np.linalg.norm(q)).tolist()
        f = fs.dense_search("twin", query, 30, None)
        m = ms.dense_search("twin", query, 30, None)
        assert same_ranking(f"dense query {i}", f, m) == 0  # random vectors: no ties
    flt = parse_filter({"topic": "geology", "n": {"$lt": 200}})
    f = fs.dense_search("twin", queries[0].tolist(), 30, flt)
    m = ms.dense_search("twin", queries[0].tolist(), 30, flt)
    assert same_ranking("filtered dense", f, m) == 0


def test_sparse_top10_matches_milvus_bm25(twin_stores: tuple[FaissStore, Any]) -> None:
    fs, ms = twin_stores
    rng = random.Random(9)
    all_words = [w for ws in _TOPICS.values() for w in ws.split()]
    queries = ["how does sourdough rise", "Mars rover landing", "neural network training",
               "glacier melting erosion", "protein folding folds", "the of and stars",
               "gravity gravity comet", "GPU kernel latency caching"]  # fmt: skip
    queries += [" ".join(rng.sample(all_words, rng.randint(1, 4))) for _ in range(24)]
    reordered = compared = 0
    for q in queries:
        f = fs.sparse_search("twin", q, 30, None)
        m = ms.sparse_search("twin", q, 30, None)
        assert f, q
        reordered += same_ranking(f"sparse {q!r}", f, m)
        compared += min(10, len(f))
    flt = parse_filter({"topic": {"$in": ["baking", "astronomy"]}})
    reordered += same_ranking(
        "filtered sparse",
        fs.sparse_search("twin", "rising star yeast", 30, flt),
        ms.sparse_search("twin", "rising star yeast", 30, flt),
    )
    # Ties exist (equal length, equal counts) but must stay rare, or the check says little.
    assert reordered <= compared // 10, (reordered, compared)
