"""Every step of BERT's tokenization of a text, as minibert performs it.

python scripts/show_tokenize.py "Héllo, I'm unaffable! 中文 and 😀"
python scripts/show_tokenize.py --pair "I drank water :D" "I was thirsty!"
"""

from __future__ import annotations

import argparse

from needs import default_model

from minibert import BertTokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text")
    parser.add_argument("--pair", help="a second text (sentence B)")
    parser.add_argument("--model", help="directory or hub id with vocab.txt (default: bert-base-uncased's vocab)")
    args = parser.parse_args()
    tokenizer = BertTokenizer.from_pretrained(args.model or default_model())
    steps = tokenizer.encode_and_show_work(args.text)
    print(f"1. text          {steps['text']!r}")
    print(f"2. cleaned       {steps['cleaned']!r}    (controls dropped, whitespace → ' ', spaces around CJK)")
    print(f"3. normalized    {steps['normalized']!r}    (accents stripped, lowercased)")
    print(f"4. basic tokens  {steps['basic_tokens']}    (split on whitespace and punctuation)")
    print("5. word pieces   " + "  ".join(f"{word} → {' '.join(pieces)}" for word, pieces in
                                          zip(steps["basic_tokens"], steps["word_pieces"])))  # fmt: skip
    encoding = tokenizer(args.text, args.pair)
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    print("6. framed:")
    print(f"   {'token':<14}{'id':>6}{'type':>6}{'mask':>6}")
    for token, index, type_id, mask in zip(tokens, encoding["input_ids"], encoding["token_type_ids"],
                                           encoding["attention_mask"]):  # fmt: skip
        print(f"   {token:<14}{index:>6}{type_id:>6}{mask:>6}")


if __name__ == "__main__":
    main()
