"""python -m trainers.reader: fine-tune an extractive reader (see train.py)."""

from trainers.reader.train import main

if __name__ == "__main__":
    raise SystemExit(main())
