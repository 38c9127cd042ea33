"""Hugging Face folders (Marian, T5, BART): tiny models and tokenisers built here with
transformers' own classes, and minitx held to transformers on them."""
