"""Document ingest: parse uploaded files into text (parsers) and split text into token
windows with overlap (chunker). Pure Python; no network or RPC code lives here."""
