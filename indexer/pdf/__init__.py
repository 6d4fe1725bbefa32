"""The PDF reader: pdfium's text layer in reading order (columns, running headers, hyphenation) behind a guard against hostile streams."""
