from bara.text.lexical import analyze, match_expression


def test_analyze_stems_and_drops_stopwords():
    assert analyze("The Connections are being closed") == ["connect", "close"]


def test_fts_syntax_is_inert():
    terms = analyze('"quoted" AND (NEAR x*) : col:val -neg ^start')
    expr = match_expression(terms)
    assert all(part.startswith('"') and part.endswith('"') for part in expr.split(" OR "))
    assert "(" not in expr and "*" not in expr and ":" not in expr


def test_only_stopwords_gives_no_terms():
    assert analyze("what is the of and") == []
    assert match_expression([]) == ""
