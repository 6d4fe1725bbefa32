"""Text analysis, below every other layer: a text's language, the words of scripts written without spaces, and the
terms keyword search makes of a text."""
