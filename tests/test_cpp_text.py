"""tiles.core.cpp_text: the `(void)x;` casts of generated code are settled per block."""
from tiles.core.cpp_text import drop_used_voids


def test_used_casts_go_unused_stay():
    src = """{
  const int a = 1, b = 2, c = 3;
  (void)a; (void)b; (void)c;
  if (b) { f(a); }  // c is only in this comment
}
g(c);"""
    got = drop_used_voids(src)
    assert "  (void)c;" in got.split("\n") and "(void)a" not in got and "(void)b" not in got
    assert got.replace("  (void)c;\n", "") == src.replace("  (void)a; (void)b; (void)c;\n", "")


def test_a_line_of_casts_all_used_goes_and_comma_form_is_read():
    src = "void k() {\n  int x = 0, y = 1;\n  (void)x, (void)y;\n  h(x + y);\n}\n"
    assert drop_used_voids(src) == "void k() {\n  int x = 0, y = 1;\n  h(x + y);\n}\n"


def test_a_use_outside_the_block_does_not_count():
    src = "{\n  {\n    int w = 0;\n    (void)w;\n  }\n  w2(w);\n}"
    assert "(void)w;" in drop_used_voids(src)
    assert drop_used_voids("no casts here\n") == "no casts here\n"


def test_comments_strings_members_and_else_branches_are_not_reads():
    src = """{
  int x = 0;
  (void)x;
  /* x */ f("x", 'x', S.x, p->x, ns::x);
}
g(x);"""
    assert "(void)x;" in drop_used_voids(src)
    src = "{\n  {\n    int x = 0;\n    (void)x;\n    if (c) { f(); }\n  } else { g(x); }\n}"
    assert "(void)x;" in drop_used_voids(src)
