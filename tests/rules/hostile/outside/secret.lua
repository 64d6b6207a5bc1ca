SECRET-MARKER: a file outside the rule directory; no diagnostic may show this line
