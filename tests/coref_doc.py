"""A three-sentence CoNLL document (two people, one book, a pronoun each) shared by the coreference tests."""

DOC = """#begin document (t); part 000
t\t0\t0\tMary\t(0
t\t0\t1\tJones\t0)
t\t0\t2\tmet\t-
t\t0\t3\tMr\t(1
t\t0\t4\tBrown\t1)
t\t0\t5\t.\t-

t\t0\t0\tShe\t(0)
t\t0\t1\tthanked\t-
t\t0\t2\thim\t(1)
t\t0\t3\tfor\t-
t\t0\t4\tthe\t(2
t\t0\t5\tbook\t2)
t\t0\t6\t.\t-

t\t0\t0\tIt\t(2)
t\t0\t1\twas\t-
t\t0\t2\tMary\t(0)
t\t0\t3\t's\t-
t\t0\t4\tfavourite\t-
t\t0\t5\t.\t-
#end document
"""
