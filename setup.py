"""setup.py: the build of the Python package sqlite_rocketmq (python/).

The package ships the SQLite extension rocketmq.so, which `make` compiles
into build/python/ext (the checkout's own build/ is left alone), so the
wheel is a platform wheel: any Python 3, this machine's platform. The
version is RMQ_VERSION of engine/rmq.h, which rocketmq_version() returns.
setuptools' own files go under build/python too.
"""
import os
import re
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1 takes it from the wheel package
    from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_BASE = os.path.join('build', 'python')
EXT_BUILD = os.path.join(BUILD_BASE, 'ext')
# An enclosing make's flags and variables (pip run from a recipe) must not
# reach this build.
MAKE_ENV_DROP = ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES')


def rmq_version():
    with open(os.path.join(ROOT, 'engine', 'rmq.h'), encoding='utf-8') as f:
        m = re.search(r'^#define RMQ_VERSION "([^"]+)"$', f.read(), re.M)
    if not m:
        sys.exit('sqlite_rocketmq: no RMQ_VERSION in engine/rmq.h')
    return m.group(1)


def make_extension():
    """Runs make for EXT_BUILD/rocketmq.so and returns its path; exits with a
    message that says what is missing when it cannot be built."""
    target = os.path.join(EXT_BUILD, 'rocketmq.so')
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV_DROP}
    cmd = ['make', '-C', ROOT, '-j%d' % (os.cpu_count() or 1), 'BUILD=' + EXT_BUILD, target]
    hint = ('it needs make, a C compiler and SQLite\'s headers (on Debian: '
            'apt-get install build-essential libsqlite3-dev)')
    try:
        rc = subprocess.call(cmd, env=env)
    except OSError as e:
        sys.exit('sqlite_rocketmq: cannot build the SQLite extension rocketmq.so: '
                 'cannot run make (%s); %s' % (e.strerror, hint))
    if rc != 0:
        sys.exit('sqlite_rocketmq: cannot build the SQLite extension rocketmq.so: '
                 '`%s` failed with status %d (its output is above); %s'
                 % (' '.join(cmd), rc, hint))
    return os.path.join(ROOT, target)


class BuildPy(build_py):
    """Copies the extension into the package beside its Python code."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, 'sqlite_rocketmq', 'rocketmq.so')
        self.copy_file(make_extension(), dest)


class PlatformWheel(bdist_wheel):
    """The wheel holds native code but no Python extension module: it suits
    any Python 3 on this platform."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return 'py3', 'none', super().get_tag()[2]


os.makedirs(os.path.join(ROOT, BUILD_BASE), exist_ok=True)  # egg_info wants its egg_base
setup(
    version=rmq_version(),
    packages=['sqlite_rocketmq'],
    package_dir={'': 'python'},
    cmdclass={'build_py': BuildPy, 'bdist_wheel': PlatformWheel},
    options={'build': {'build_base': BUILD_BASE}, 'egg_info': {'egg_base': BUILD_BASE}},
)
