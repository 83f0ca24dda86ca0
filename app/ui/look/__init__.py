"""How the interface looks and speaks: the theme, the rows' colours, the language, applied."""
