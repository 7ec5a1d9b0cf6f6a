import ast
import unittest

import statkit
from statkit.central import mean, median, mode
from statkit.scale import clamp, normalize
from statkit.spread import value_range, variance


# The package as released (before the regression). Every function except the
# broken one must keep exactly this code: reviewers reject unrelated rewrites.
RELEASED = {
    'statkit/central.py': '"""Measures of central tendency."""\n\n\ndef mean(xs):\n    """Arithmetic mean of xs as a float; 0.0 for an empty sequence."""\n    if not xs:\n        return 0.0\n    return sum(xs) / len(xs)\n\n\ndef median(xs):\n    """Middle value of xs as a float (the mean of the two middle values for an\n    even length); 0.0 for an empty sequence."""\n    if not xs:\n        return 0.0\n    s = sorted(xs)\n    mid = len(s) // 2\n    if len(s) % 2:\n        return float(s[mid])\n    return (s[mid - 1] + s[mid]) / 2\n\n\ndef mode(xs):\n    """Most frequent value of xs; a tie goes to the smallest of the tied values.\n    None for an empty sequence."""\n    if not xs:\n        return None\n    counts = {}\n    for x in xs:\n        counts[x] = counts.get(x, 0) + 1\n    best = max(counts.values())\n    return min(x for x, c in counts.items() if c == best)\n',
    'statkit/spread.py': '"""Measures of spread."""\n\n\ndef variance(xs):\n    """Population variance of xs (divide by n); 0.0 for an empty sequence."""\n    if not xs:\n        return 0.0\n    m = sum(xs) / len(xs)\n    return sum((x - m) ** 2 for x in xs) / len(xs)\n\n\ndef value_range(xs):\n    """Largest minus smallest value of xs; 0 for an empty sequence."""\n    if not xs:\n        return 0\n    return max(xs) - min(xs)\n',
    'statkit/scale.py': '"""Rescaling helpers."""\n\n\ndef normalize(xs):\n    """Min-max rescale xs into [0.0, 1.0], as a list of floats. An empty sequence\n    gives []; when every value is equal, every result is 0.0."""\n    if not xs:\n        return []\n    lo, hi = min(xs), max(xs)\n    if hi == lo:\n        return [0.0 for _ in xs]\n    return [(x - lo) / (hi - lo) for x in xs]\n\n\ndef clamp(x, lo, hi):\n    """x limited to the closed interval [lo, hi] (lo <= hi)."""\n    return max(lo, min(x, hi))\n',
}
BROKEN = 'median'


def functions(source):
    tree = ast.parse(source)
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, ast.FunctionDef)}


class TestCentral(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([3, 4]), 3.5)
        self.assertEqual(mean([7]), 7.0)
        self.assertAlmostEqual(mean([1, 2, 4]), 7 / 3)
        self.assertEqual(mean([-5, 2]), -1.5)
        self.assertEqual(mean([]), 0.0)

    def test_median(self):
        self.assertEqual(median([10, 2, 6, 4]), 5.0)
        self.assertEqual(median([9, 1, 5]), 5.0)
        self.assertEqual(median([1, 2]), 1.5)
        self.assertEqual(median([]), 0.0)

    def test_mode(self):
        self.assertEqual(mode([9, 4, 9, 4, 6]), 4)
        self.assertEqual(mode([5, 5, 2]), 5)
        self.assertEqual(mode([8]), 8)
        self.assertEqual(mode([6, 2, 2, 6]), 2)
        self.assertIsNone(mode([]))


class TestSpread(unittest.TestCase):
    def test_variance(self):
        self.assertAlmostEqual(variance([2, 4, 4, 4, 5, 5, 7, 9]), 4.0)
        self.assertAlmostEqual(variance([1, 3]), 1.0)
        self.assertEqual(variance([5]), 0.0)
        self.assertEqual(variance([]), 0.0)

    def test_value_range(self):
        self.assertEqual(value_range([3, -2, 8]), 10)
        self.assertEqual(value_range([7]), 0)
        self.assertEqual(value_range([]), 0)


class TestScale(unittest.TestCase):
    def test_normalize(self):
        self.assertEqual(normalize([10, 20, 30, 50]), [0.0, 0.25, 0.5, 1.0])
        self.assertEqual(normalize([-4, 0, 4]), [0.0, 0.5, 1.0])
        self.assertEqual(normalize([7, 7, 7]), [0.0, 0.0, 0.0])
        self.assertEqual(normalize([]), [])

    def test_clamp(self):
        self.assertEqual(clamp(15, 1, 9), 9)
        self.assertEqual(clamp(0, 1, 9), 1)
        self.assertEqual(clamp(4, 1, 9), 4)


class TestRelease(unittest.TestCase):
    def test_patch_version(self):
        self.assertEqual(statkit.__version__, "0.4.1")

    def test_only_the_broken_function_changed(self):
        for path, released in RELEASED.items():
            with open(path) as f:
                now = functions(f.read())
            for name, code in functions(released).items():
                self.assertIn(name, now)
                if name != BROKEN:
                    self.assertEqual(now[name], code, name)


if __name__ == "__main__":
    unittest.main()
