"""The shared evaluation protocol: perplexity, mixture, analogies, similarity, BLEU, decoding."""
