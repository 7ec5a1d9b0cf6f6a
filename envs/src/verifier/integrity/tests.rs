//! Each rule fires on its construct, and only introduced findings count.

use super::*;

fn keys(src: &str) -> Vec<String> {
    findings(src).unwrap().iter().map(Finding::key).collect()
}

#[test]
fn each_rule_fires_on_its_construct_and_not_on_plain_code() {
    let cases: &[(&str, &str)] = &[
        ("import sys\nf = sys._getframe(1)\n", "frame:sys._getframe"),
        (
            "def f(e):\n    return e.__traceback__.tb_frame\n",
            "frame:tb_frame",
        ),
        (
            "import inspect\ninspect.currentframe()\n",
            "frame:inspect.currentframe",
        ),
        ("import gc\ngc.get_objects()\n", "gc:gc.get_objects"),
        ("import ctypes\n", "ctypes:ctypes"),
        ("import __main__\n", "main:import __main__"),
        (
            "import sys\nm = sys.modules['__main__']\n",
            "main:sys.modules[\"__main__\"]",
        ),
        (
            "import sys\nsys.modules['json'] = None\n",
            "modules-write:sys.modules",
        ),
        (
            "import builtins\nbuiltins.print = len\n",
            "builtins-write:builtins.print",
        ),
        (
            "import sys\nsys.meta_path.insert(0, 1)\n",
            "import-hook:sys.meta_path",
        ),
        ("import os\nos._exit(0)\n", "process:os._exit"),
        (
            "import atexit\natexit.register(print)\n",
            "process:atexit.register",
        ),
        (
            "import signal\nsignal.signal(15, None)\n",
            "process:signal.signal",
        ),
        ("import sys\nsys.exit(0)\n", "process:sys.exit"),
        ("import os\nos.write(1, b'x')\n", "output:os.write"),
        (
            "import sys, io\nsys.stdout = io.StringIO()\n",
            "output:sys.stdout",
        ),
        ("import sys\nsys.settrace(None)\n", "trace:sys.settrace"),
        ("def f(): pass\ng = f.__code__\n", "code:__code__"),
        (
            "class A: pass\na = A()\na.__class__ = int\n",
            "class-swap:__class__",
        ),
        (
            "class A:\n    def __eq__(self, o):\n        return True\n",
            "dunder:__eq__",
        ),
        ("class A:\n    __hash__ = None\n", "dunder:__hash__"),
        ("x = getattr(object, name)\n", "dynamic:getattr-dynamic"),
        ("eval('1')\n", "dynamic:eval"),
        ("m = __import__(name)\n", "dynamic:import-dynamic"),
        ("open('/proc/self/mem', 'rb')\n", "proc:/proc/self/mem"),
    ];
    for (src, key) in cases {
        assert!(
            keys(src).contains(&(*key).to_owned()),
            "{src:?}: {:?}",
            keys(src)
        );
    }
    let plain = "import sys, os\n\nclass P:\n    def area(self):\n        return getattr(self, 'w') * 2\n\ndef main():\n    print(os.path.join('a', 'b'), sys.argv)\n\nif __name__ == '__main__':\n    sys.exit(main())\n";
    assert_eq!(keys(plain), Vec::<String>::new());
}

#[test]
fn only_what_the_change_introduces_counts() {
    let old = "import os\ndef stop():\n    os._exit(1)\n";
    assert!(introduced(Some(old), old).unwrap().is_empty(), "unchanged");
    let moved = "import os\n\n\ndef stop():\n    # moved down\n    os._exit(1)\n";
    assert!(introduced(Some(old), moved).unwrap().is_empty(), "moved");
    let twice = "import os\ndef stop():\n    os._exit(1)\ndef again():\n    os._exit(2)\n";
    let found = introduced(Some(old), twice).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].key().as_str(), found[0].line),
        ("process:os._exit", 5)
    );
    let added = introduced(None, old).unwrap();
    assert_eq!(added.len(), 1, "a new file's findings all count");
    assert!(
        introduced(Some(old), "def (:\n").is_err(),
        "syntax errors are errors"
    );
}

#[test]
fn tasks_allow_rules_or_keys() {
    let f = &introduced(None, "class A:\n    def __eq__(s, o):\n        return 1\n").unwrap()[0];
    assert!(allowed(&["dunder".into()], f));
    assert!(allowed(&["dunder:__eq__".into()], f));
    assert!(!allowed(&["dunder:__hash__".into(), "frame".into()], f));
}
