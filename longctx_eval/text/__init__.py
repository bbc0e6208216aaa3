"""Text utilities: tokenization with offsets, sentence spans, chunking and the overlap-offset index."""

from longctx_eval.text.chunking import Chunk, ChunkConfig, Embed, chunk_document, iter_chunks
from longctx_eval.text.offset_index import OffsetIndex
from longctx_eval.text.sentences import split_sentences
from longctx_eval.text.tiktoken_tokenizer import TiktokenTokenizer
from longctx_eval.text.tokenizer import Encoded, Tokenizer

__all__ = [
    "Chunk",
    "ChunkConfig",
    "Embed",
    "Encoded",
    "OffsetIndex",
    "TiktokenTokenizer",
    "Tokenizer",
    "chunk_document",
    "iter_chunks",
    "split_sentences",
]
