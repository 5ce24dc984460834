from __future__ import annotations

import numpy as np
import pytest

from composer.data import ByteTokenizer, DataError, HFTokenizer, load_tokenizer
from composer.data.tokenizer import token_dtype


def test_byte_tokenizer_round_trips_unicode():
    tok = load_tokenizer(None)
    assert (tok.name, tok.vocab_size, tok.eos_id) == ("bytes", 257, 256)
    texts = ["héllo wörld ✓", "", "def f():\n    return 1\n", "日本語"]
    ids = tok.encode_batch(texts)
    assert ids[1] == [] and all(max(seq, default=0) < 256 for seq in ids)
    assert [tok.decode(seq) for seq in ids] == texts
    assert ids[0] == list("héllo wörld ✓".encode())


def test_byte_encode_documents_appends_eos_after_each_document():
    tok = ByteTokenizer()
    flat, lengths = tok.encode_documents(["ab", "", "c"])
    assert flat.dtype == np.uint16
    assert flat.tolist() == [97, 98, 256, 256, 99, 256]
    assert lengths.tolist() == [3, 1, 2]


@pytest.mark.parametrize("name", ["bytes", "BYTE"])
def test_byte_tokenizer_by_name(name):
    assert isinstance(load_tokenizer(name), ByteTokenizer)


def test_local_hf_tokenizer_loads_by_path(hf_tokenizer_dir):
    tok = load_tokenizer(str(hf_tokenizer_dir))
    assert isinstance(tok, HFTokenizer)
    assert tok.vocab_size == len(tok.hf) and tok.vocab_size <= 400
    assert tok.eos_id == tok.hf.convert_tokens_to_ids("<|eos|>")
    ids = tok.encode_batch(["alpha0 beta1", "gamma2"])
    assert tok.decode(ids[0]) == "alpha0 beta1" and tok.eos_id not in ids[0]
    flat, lengths = tok.encode_documents(["alpha0 beta1", "gamma2"])
    assert flat.dtype == np.uint16
    assert flat.tolist() == ids[0] + [tok.eos_id] + ids[1] + [tok.eos_id]
    assert lengths.tolist() == [len(ids[0]) + 1, len(ids[1]) + 1]
    assert tok.fingerprint == load_tokenizer(hf_tokenizer_dir).fingerprint != ByteTokenizer.fingerprint


def test_token_dtype_by_vocab_size():
    assert token_dtype(257) == np.uint16 and token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.uint32 and token_dtype(128_256) == np.uint32


def test_missing_local_tokenizer_path_is_a_one_line_data_error(tmp_path):
    with pytest.raises(DataError, match="tokenizer path .* does not exist; pass a directory") as info:
        load_tokenizer(str(tmp_path / "no-such-tokenizer"))
    assert "\n" not in str(info.value)


def test_unknown_hub_tokenizer_offline_is_a_one_line_data_error():
    with pytest.raises(DataError, match="could not load tokenizer 'composer-test/no-such-tokenizer'") as info:
        load_tokenizer("composer-test/no-such-tokenizer")
    message = str(info.value)
    assert "\n" not in message and "hub unreachable" in message and "local tokenizer directory" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_directory_without_tokenizer_files_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="could not load a tokenizer from"):
        load_tokenizer(tmp_path)
