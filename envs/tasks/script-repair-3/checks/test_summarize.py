import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.abspath("bin/summarize.sh")

CSV = ("date,category,amount,note\n"
       "2024-04-01,office supplies,19.90,printer paper, 2 packs\n"
       "2024-04-02,rent,850.00,\n"
       "2024-04-03,office supplies,4.10,pens\n"
       "2024-04-05,meals,32.75,\"client lunch, downtown\"\n"
       "2024-04-07,meals,8.25,")
SUMMARY = "meals,41.00\noffice supplies,24.00\nrent,850.00\nTOTAL,915.00\n"


class TestSummarize(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.out = os.path.join(self.tmp, "summary.txt")

    def summarize(self, text):
        src = os.path.join(self.tmp, "input.csv")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run(["bash", SCRIPT, src, self.out], capture_output=True, text=True, timeout=20)
        with open(self.out) as f:
            return r.returncode, f.read()

    def test_summary(self):
        self.assertEqual(self.summarize(CSV), (0, SUMMARY))

    def test_existing_output_replaced(self):
        with open(self.out, "w") as f:
            f.write("old,1.00\nTOTAL,1.00\n")
        self.assertEqual(self.summarize(CSV), (0, SUMMARY))

    def test_header_not_a_category(self):
        _, text = self.summarize("date,category,amount,note\n2024-05-01,fuel,40.00,full tank\n")
        self.assertEqual(text, "fuel,40.00\nTOTAL,40.00\n")

    def test_last_line_without_newline(self):
        _, text = self.summarize("date,category,amount,note\n2024-05-02,fuel,10.50,x\n2024-05-03,parking,3.00,")
        self.assertEqual(text, "fuel,10.50\nparking,3.00\nTOTAL,13.50\n")

    def test_header_only(self):
        self.assertEqual(self.summarize("date,category,amount,note\n"), (0, "TOTAL,0.00\n"))


if __name__ == "__main__":
    unittest.main()
