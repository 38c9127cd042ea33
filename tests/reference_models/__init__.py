"""Reference implementations of the encoder-decoder layouts `minitx import` reads, written for
the tests in this project's own words: PyTorch's nn.Transformer translation tutorial
(nn_transformer_tutorial.py) and Harvard NLP's Annotated Transformer (annotated_transformer.py),
with the module and parameter names of the originals so their state_dicts carry the same keys,
and a toy digits task to train them on (toy.py). An importer is held to these, never to
minitx's own model."""
