"""gguf_rewrite: the GGUF writing shared by the bench model makers
(make_widened.py, make_widened_gemma3.py, make_llama1b.py)."""
from gguf import GGUFReader, GGUFValueType, GGUFWriter


def copy_keys(r: GGUFReader, w: GGUFWriter, overrides: dict) -> None:
    """Every key of r into w with its type, overrides replacing values."""
    for f in r.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue
        vt = f.types[0]
        sub = f.types[-1] if vt == GGUFValueType.ARRAY else None
        w.add_key_value(f.name, overrides.get(f.name, f.contents()), vt, sub_type=sub)


def finish(w: GGUFWriter) -> None:
    """Header, keys and tensors to the file, then close it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
