"""The Triton-C frontend: a kernel in the C-syntax block language -> the same kir as the
Python frontend's.

``preprocess`` runs the C preprocessor (pcpp; the variant's constants become macros),
``grammar.lark`` is the language (parsed by lark), ``translate`` turns the parse tree into
the Python AST of the equivalent ``@aotk.jit`` kernel, each node carrying its line and
column in the Triton-C file, and ``aotk.frontend.codegen`` generates the kir from that AST as
for any Python kernel: every rule of the language (typing, broadcasting, control flow) and
every error is shared; ``builtins`` holds the few operations C spells differently (its
integer division, declarations with a type and shape, reductions by subscript).
"""
