"""The peer chunkers, each set up with the same GPT-2 tokenizer (tiktoken r50k_base) and 512/64 budget."""

from __future__ import annotations

from benchmarks.chunking import MAX_TOKENS, OVERLAP, Chunker, Spans
from benchmarks.gpt2 import gpt2_dir, tiktoken_r50k


def chonkie_token() -> Chunker:
    """chonkie TokenChunker: fixed token windows, cut mid-sentence; char offsets from decoded lengths."""
    from chonkie import TokenChunker

    chunker = TokenChunker(tokenizer=tiktoken_r50k(), chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP)
    return lambda text: _chonkie(chunker.chunk(text))


def chonkie_sentence() -> Chunker:
    """chonkie SentenceChunker: sentences on literal delimiters, packed by summed per-sentence counts."""
    from chonkie import SentenceChunker

    chunker = SentenceChunker(tokenizer=tiktoken_r50k(), chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP)
    return lambda text: _chonkie(chunker.chunk(text))


def _chonkie(chunks: list) -> Spans:
    return Spans([c.text for c in chunks], [c.start_index for c in chunks], [c.end_index for c in chunks])


def semchunk() -> Chunker:
    """semchunk: recursive splitting by a token counter, exact (start, end) offsets, token overlap."""
    import semchunk as sc

    chunker = sc.chunkerify(tiktoken_r50k(), MAX_TOKENS)

    def run(text: str) -> Spans:
        texts, offsets = chunker(text, offsets=True, overlap=OVERLAP)
        return Spans(list(texts), [s for s, _ in offsets], [e for _, e in offsets])

    return run


def langchain_tiktoken() -> Chunker:
    """langchain RecursiveCharacterTextSplitter counting tiktoken r50k_base tokens, add_start_index=True."""
    tiktoken_r50k()  # points TIKTOKEN_CACHE_DIR at the offline file, which langchain then loads by name
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="r50k_base", chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP, add_start_index=True
    )
    return lambda text: _langchain(splitter.create_documents([text]))


def langchain_hf() -> Chunker:
    """langchain RecursiveCharacterTextSplitter counting with the HF GPT-2 fast tokenizer (the issue's case)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=str(gpt2_dir() / "tokenizer.json"))
    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        hf, chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP, add_start_index=True
    )
    return lambda text: _langchain(splitter.create_documents([text]))


def _langchain(docs: list) -> Spans:
    texts = [d.page_content for d in docs]
    starts = [d.metadata["start_index"] for d in docs]
    return Spans(texts, starts, [s + len(t) for s, t in zip(starts, texts, strict=True)])


def llama_sentence() -> Chunker:
    """llama-index SentenceSplitter (its bundled punkt_tab) counting tiktoken r50k_base tokens."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP, tokenizer=tiktoken_r50k().encode)

    def run(text: str) -> Spans:
        nodes = splitter.get_nodes_from_documents([Document(text=text)])
        texts = [n.get_content() for n in nodes]
        return Spans(texts, [n.start_char_idx for n in nodes], [n.end_char_idx for n in nodes])

    return run


def _ours() -> Chunker:
    from benchmarks.chunking import ours

    return ours("tiktoken")


def _ours_hf() -> Chunker:
    from benchmarks.chunking import ours

    return ours("hf")


# name -> (label for the table, setup); the setup imports the library and loads its tokenizer (timed apart).
METHODS = {
    "ours": ("ours: chunk_document + OffsetIndex, tiktoken:r50k_base", _ours),
    "ours_hf": ("ours, same GPT-2 via HF tokenizers (tokenizer.json)", _ours_hf),
    "chonkie_token": ("chonkie TokenChunker", chonkie_token),
    "chonkie_sentence": ("chonkie SentenceChunker", chonkie_sentence),
    "semchunk": ("semchunk", semchunk),
    "llama_sentence": ("llama-index SentenceSplitter", llama_sentence),
    "langchain_tiktoken": ("langchain RecursiveCharacterTextSplitter (tiktoken)", langchain_tiktoken),
    "langchain_hf": ("langchain RecursiveCharacterTextSplitter (HF tokenizer)", langchain_hf),
}
