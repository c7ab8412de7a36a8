"""The `linalg` dialect as the front end parses it.

xDSL 0.75 has `linalg.generic` and a few named ops, with bugs that the conformance programs hit
(a parenthesized result list after a generic's region, mixed-precision matmul verification,
`indexing_maps` on matmul). This module replaces xDSL's linalg dialect: the generic, yield and
index ops, and one op class per named op that all share a tolerant syntax
(`linalg.NAME [dimension(d)] [{attrs}] [indexing_maps = [...]] ins(...) outs(...)
[permutation|dimensions = [...]] [(args) {region} | {fn}] [-> types]`). The named ops keep their
keyword attributes as plain attributes; the importer gives them their semantics.
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import auto

from xdsl.dialects.builtin import (AffineMapAttr, ArrayAttr, DenseArrayBase, IndexType,
                                   IntegerAttr, StringAttr, TensorType, UnitAttr, i64)
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg import ops as xops
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, Region, SSAValue, TypeAttribute
from xdsl.irdl import (AttrSizedOperandSegments, IRDLOperation, irdl_attr_definition,
                       irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def,
                       region_def, var_operand_def, var_result_def)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


def _parse_operand_group(parser: Parser, keyword: str) -> list[SSAValue]:
    """`ins(%a, %b : T, U)`; the keyword has been consumed."""
    pos = parser.pos
    parser.parse_punctuation("(")
    if parser.parse_optional_punctuation(")") is not None:
        return []
    names = parser.parse_comma_separated_list(Parser.Delimiter.NONE,
                                              parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    if len(names) != len(types):
        parser.raise_error(f"{keyword}: {len(names)} operands but {len(types)} types", pos,
                           parser.pos)
    return list(parser.resolve_operands(names, types, pos))


def _parse_result_types(parser: Parser) -> list[TypeAttribute]:
    """`-> T` or `-> (T, U)`, if present."""
    if parser.parse_optional_punctuation("->") is None:
        return []
    if parser.parse_optional_punctuation("(") is not None:
        if parser.parse_optional_punctuation(")") is not None:
            return []
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        return types
    return [parser.parse_type()]


def _int_list(parser: Parser) -> ArrayAttr:
    """`[1, 0, 2]` (or `array<i64: 1, 0>`) as an ArrayAttr of i64 IntegerAttrs."""
    if parser.parse_optional_punctuation("[") is not None:
        if parser.parse_optional_punctuation("]") is not None:
            return ArrayAttr([])
        values = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_integer)
        parser.parse_punctuation("]")
        return ArrayAttr([IntegerAttr(v, i64) for v in values])
    attr = parser.parse_attribute()
    if isinstance(attr, DenseArrayBase):
        return ArrayAttr([IntegerAttr(int(v), i64) for v in attr.get_values()])
    if isinstance(attr, ArrayAttr):
        return attr
    parser.raise_error("expected a list of integers")


def _print_groups(printer: Printer, inputs: Sequence[SSAValue],
                  outputs: Sequence[SSAValue]) -> None:
    for keyword, values in (("ins", inputs), ("outs", outputs)):
        if values:
            printer.print_string(f" {keyword}(")
            printer.print_list(values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in values], printer.print_attribute)
            printer.print_string(")")


def _tensor_results(outputs: Sequence[SSAValue]) -> list[Attribute]:
    return [o.type for o in outputs if isinstance(o.type, TensorType)]


@irdl_op_definition
class GenericOp(xops.GenericOp):
    """linalg.generic, parsed as MLIR writes it (including `-> (T, U)` result lists)."""

    name = "linalg.generic"
    inputs = var_operand_def()
    outputs = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])
    iterator_types = prop_def(ArrayAttr[IteratorTypeAttr])
    doc = opt_prop_def(StringAttr)
    library_call = opt_prop_def(StringAttr)

    @classmethod
    def parse(cls, parser: Parser) -> "GenericOp":
        start = parser.pos
        attrs = dict(parser.parse_optional_attr_dict())
        maps = attrs.pop("indexing_maps", None)
        iterators = attrs.pop("iterator_types", None)
        if not isinstance(maps, ArrayAttr) or not isinstance(iterators, ArrayAttr):
            parser.raise_error("linalg.generic needs indexing_maps and iterator_types",
                               start, parser.pos)
        iterator_types: list[Attribute] = []
        for it in iterators:
            if isinstance(it, IteratorTypeAttr):
                iterator_types.append(it)
            elif isinstance(it, StringAttr) and it.data in ("parallel", "reduction", "window"):
                iterator_types.append(IteratorTypeAttr(IteratorType(it.data)))
            else:
                parser.raise_error(f"unknown iterator type {it}", start, parser.pos)
        props: dict[str, Attribute] = {"indexing_maps": maps,
                                       "iterator_types": ArrayAttr(iterator_types)}
        for key in ("doc", "library_call"):
            if key in attrs:
                props[key] = attrs.pop(key)
        inputs = _parse_operand_group(parser, "ins") if parser.parse_optional_characters("ins") else []
        outputs = _parse_operand_group(parser, "outs") if parser.parse_optional_characters("outs") else []
        if parser.parse_optional_keyword("attrs"):
            parser.parse_punctuation("=")
            attrs |= parser.parse_optional_attr_dict()
        body = parser.parse_region()
        result_types = _parse_result_types(parser)
        # Built from the properties as parsed: verification, not the typed constructor,
        # says what is wrong with them.
        op = cls.build(operands=[inputs, outputs], result_types=[result_types],
                       properties=props, regions=[body])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" {indexing_maps = ")
        printer.print_attribute(self.indexing_maps)
        printer.print_string(", iterator_types = [")
        printer.print_list([f'"{t.data.value}"' for t in self.iterator_types],
                           printer.print_string)
        printer.print_string("]}")
        _print_groups(printer, self.inputs, self.outputs)
        printer.print_string(" ")
        printer.print_region(self.body)
        if self.res:
            printer.print_string(" -> (")
            printer.print_list([r.type for r in self.res], printer.print_attribute)
            printer.print_string(")")

    def verify_(self) -> None:
        n = len(self.iterator_types)
        if len(self.indexing_maps) != len(self.inputs) + len(self.outputs):
            raise VerifyException("linalg.generic needs one indexing map per operand")
        for m in self.indexing_maps:
            if m.data.num_dims != n:
                raise VerifyException(f"linalg.generic map {m} does not have {n} dims")
        if [r.type for r in self.res] != _tensor_results(list(self.outputs)):
            raise VerifyException("linalg.generic result types must be the outs' tensor types")


# xDSL's own linalg.yield and linalg.index are kept (linalg.index accepts any GenericOp
# subclass as its parent).
YieldOp = xops.YieldOp
IndexOp = xops.IndexOp


class NamedOp(IRDLOperation):
    """A linalg named op: inputs, outputs (`inits`), tensor results, keyword attributes
    (`permutation`, `dimensions`, `dimension`, `indexing_maps`, `cast`, `strides`, ...) and, for
    linalg.map/reduce, an optional body region (or `fn`, the op name of the short form)."""

    inputs = var_operand_def()
    outputs = var_operand_def()
    res = var_result_def()
    body = region_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @classmethod
    def parse(cls, parser: Parser) -> "NamedOp":
        attrs: dict[str, Attribute] = {}
        inputs: list[SSAValue] = []
        outputs: list[SSAValue] = []
        body = Region()
        while True:
            if parser.parse_optional_characters("ins") is not None:
                inputs = _parse_operand_group(parser, "ins")
            elif parser.parse_optional_characters("outs") is not None:
                outputs = _parse_operand_group(parser, "outs")
            elif parser.parse_optional_characters("dimension") is not None:
                parser.parse_punctuation("(")
                attrs["dimension"] = IntegerAttr(parser.parse_integer(), i64)
                parser.parse_punctuation(")")
            elif (key := _optional_list_keyword(parser)) is not None:
                parser.parse_punctuation("=")
                if key == "indexing_maps":
                    attrs[key] = parser.parse_attribute()
                else:
                    attrs[key] = _int_list(parser)
            elif parser.parse_optional_characters("cast") is not None:
                parser.parse_punctuation("=")
                attrs["cast"] = parser.parse_attribute()
            elif parser._current_token.text == "{":  # noqa: SLF001 (attr dict or `{fn}`)
                for key, value in parser.parse_optional_attr_dict().items():
                    if "." in key and isinstance(value, UnitAttr):
                        attrs["fn"] = StringAttr(key)
                    else:
                        attrs[key] = value
            elif parser._current_token.text == "(":  # noqa: SLF001 (region arguments)
                args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN,
                                                         parser.parse_argument)
                body = parser.parse_region(args)
            else:
                break
        _parse_result_types(parser)
        op = cls(operands=[inputs, outputs], result_types=[_tensor_results(outputs)],
                 regions=[body])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        _print_groups(printer, self.inputs, self.outputs)
        if self.attributes:
            printer.print_string(" ")
            printer.print_attr_dict(self.attributes)
        if self.res:
            printer.print_string(" -> ")
            printer.print_list([r.type for r in self.res], printer.print_attribute)

    def verify_(self) -> None:
        if [r.type for r in self.res] != _tensor_results(list(self.outputs)):
            raise VerifyException(f"{self.name}: result types must be the outs' tensor types")


_LIST_KEYWORDS = ("indexing_maps", "permutation", "dimensions")


def _optional_list_keyword(parser: Parser) -> str | None:
    for key in _LIST_KEYWORDS:
        if parser._current_token.text == key:  # noqa: SLF001
            parser.parse_optional_characters(key)
            return key
    return None


class _PackLikeOp(IRDLOperation):
    """linalg.pack / linalg.unpack:
    `%src [padding_value(%p : T)] [outer_dims_perm = [..]] inner_dims_pos = [..]
    inner_tiles = [4, %t] into %dest : T -> U`. `static_inner_tiles` holds -1 where the tile is
    the next `inner_tiles` operand."""

    source = operand_def(TensorType)
    dest = operand_def(TensorType)
    padding_value = opt_operand_def()
    inner_tiles = var_operand_def()
    res = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    @classmethod
    def parse(cls, parser: Parser) -> "_PackLikeOp":
        pos = parser.pos
        source_name = parser.parse_unresolved_operand()
        attrs: dict[str, Attribute] = {}
        padding: list[SSAValue] = []
        tiles: list[SSAValue] = []
        while True:
            if parser.parse_optional_characters("padding_value") is not None:
                parser.parse_punctuation("(")
                pad = parser.parse_unresolved_operand()
                parser.parse_punctuation(":")
                padding = [parser.resolve_operand(pad, parser.parse_type())]
                parser.parse_punctuation(")")
            elif parser.parse_optional_characters("outer_dims_perm") is not None:
                parser.parse_punctuation("=")
                attrs["outer_dims_perm"] = _int_list(parser)
            elif parser.parse_optional_characters("inner_dims_pos") is not None:
                parser.parse_punctuation("=")
                attrs["inner_dims_pos"] = _int_list(parser)
            elif parser.parse_optional_characters("inner_tiles") is not None:
                parser.parse_punctuation("=")
                static: list[int] = []

                def tile() -> None:
                    operand = parser.parse_optional_unresolved_operand()
                    if operand is not None:
                        tiles.append(parser.resolve_operand(operand, IndexType()))
                        static.append(-1)
                    else:
                        static.append(parser.parse_integer())
                parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, tile)
                attrs["static_inner_tiles"] = ArrayAttr([IntegerAttr(v, i64) for v in static])
            else:
                break
        parser.parse_keyword("into")
        dest_name = parser.parse_unresolved_operand()
        attrs |= parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_punctuation("->")
        dest_type = parser.parse_type()
        source, dest = parser.resolve_operands([source_name, dest_name], [source_type, dest_type], pos)
        op = cls(operands=[source, dest, padding, tiles], result_types=[[dest_type]])
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(" ")
        printer.print_attr_dict(self.attributes)
        printer.print_string(" into ")
        printer.print_operand(self.dest)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.dest.type)

    def verify_(self) -> None:
        pos = self.attributes.get("inner_dims_pos")
        tiles = self.attributes.get("static_inner_tiles")
        if not isinstance(pos, ArrayAttr) or not isinstance(tiles, ArrayAttr) \
                or len(pos) != len(tiles):
            raise VerifyException(f"{self.name}: inner_dims_pos and inner_tiles must have "
                                  "the same length")
        if sum(1 for t in tiles if t.value.data < 0) != len(self.inner_tiles):
            raise VerifyException(f"{self.name}: dynamic inner tile count mismatch")
        packed = self.dest.type if self.name == "linalg.pack" else self.source.type
        unpacked = self.source.type if self.name == "linalg.pack" else self.dest.type
        assert isinstance(packed, TensorType) and isinstance(unpacked, TensorType), \
            "IRDL checks the operand types before verify_"
        rank = len(unpacked.get_shape())
        shape = packed.get_shape()
        if len(shape) != rank + len(tiles):
            raise VerifyException(f"{self.name}: the packed rank must be {rank + len(tiles)}")
        for i, t in enumerate(tiles):
            tile, dim = t.value.data, shape[rank + i]
            if tile >= 0 and dim >= 0 and tile != dim:
                raise VerifyException(f"{self.name}: inner tile {i} is {tile} but the packed "
                                      f"type has {dim}")


@irdl_op_definition
class PackOp(_PackLikeOp):
    name = "linalg.pack"


@irdl_op_definition
class UnpackOp(_PackLikeOp):
    name = "linalg.unpack"


class TypeFn(StrEnum):
    """linalg's element conversion functions (the `cast` attribute of named ops)."""

    CAST_SIGNED = auto()
    CAST_UNSIGNED = auto()


@irdl_attr_definition
class TypeFnAttr(EnumAttribute[TypeFn]):
    """`#linalg.type_fn<cast_unsigned>`."""

    name = "linalg.type_fn"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> TypeFn:
        with parser.in_angle_brackets():
            return super().parse_parameter(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            super().print_parameter(printer)


# Named ops whose semantics the importer knows (irtk/compiler/frontend/named_ops.py).
NAMED_OPS = """
matmul batch_matmul matvec vecmat batch_matvec batch_vecmat dot batch_reduce_matmul
matmul_transpose_a matmul_transpose_b batch_matmul_transpose_a batch_matmul_transpose_b
quantized_matmul quantized_batch_matmul
fill copy transpose broadcast reduce map softmax
add sub mul div div_unsigned max min powf exp log abs ceil floor negf reciprocal round sqrt
rsqrt square tanh erf select
conv_1d conv_2d conv_3d conv_1d_nwc_wcf conv_1d_ncw_fcw conv_2d_nhwc_hwcf conv_2d_nhwc_fhwc
conv_2d_nchw_fchw conv_2d_ngchw_fgchw conv_2d_ngchw_gfchw conv_2d_nhwgc_gfhwc conv_2d_nhwc_hwcf_q conv_2d_nhwc_fhwc_q conv_3d_ndhwc_dhwcf
depthwise_conv_1d_nwc_wc depthwise_conv_1d_ncw_cw depthwise_conv_2d_nhwc_hwc
depthwise_conv_2d_nchw_chw depthwise_conv_2d_nhwc_hwc_q depthwise_conv_3d_ndhwc_dhwc
pooling_nhwc_sum pooling_nhwc_max pooling_nhwc_min pooling_nhwc_max_unsigned
pooling_nhwc_min_unsigned pooling_nchw_sum pooling_nchw_max pooling_nwc_sum pooling_nwc_max
pooling_nwc_min pooling_ncw_sum pooling_ncw_max pooling_ndhwc_sum pooling_ndhwc_max
pooling_ndhwc_min
""".split()


def _named_class(short: str) -> type[NamedOp]:
    cls = type("".join(p.capitalize() for p in short.split("_")) + "Op", (NamedOp,),
               {"name": f"linalg.{short}", "__doc__": f"linalg.{short} (see NamedOp)."})
    return irdl_op_definition(cls)


NAMED_OP_CLASSES = {f"linalg.{n}": _named_class(n) for n in NAMED_OPS}

Linalg = Dialect("linalg", [GenericOp, YieldOp, IndexOp, PackOp, UnpackOp,
                            *NAMED_OP_CLASSES.values()], [IteratorTypeAttr, TypeFnAttr])
