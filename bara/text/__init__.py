"""The bottom layer: pure text functions with no bara imports above :mod:`bara.text`.

:mod:`bara.text.lexical` (tokenise, stem, FTS match expressions), :mod:`bara.text.fusion`
(weighted reciprocal rank fusion) and :mod:`bara.text.stopwords` (one named list per purpose).
"""
