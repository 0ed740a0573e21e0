"""loopgate desktop agent: a private X display (Xvfb), a window manager and an accessibility
bus, driven by JSON lines on stdin (one request a line, one reply a line on stdout).

Started by loopgate-desktop inside the caller's sandbox; everything it starts is its child and
dies with it (stdin closed, or its process group killed). argv: WIDTH HEIGHT.
"""
import base64
import ctypes
import json
import os
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zlib

warnings.simplefilter("ignore")

MAX_NODES = 3000
MAX_DEPTH = 40
TEXT_ROLES = {"text", "entry", "password text", "paragraph", "terminal", "document text", "spin button", "editbar"}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Fail(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def need(name):
    found = shutil.which(name)
    if not found:
        raise Fail("missing_tool", f"{name} not found on PATH (install it: scripts/install-deps.sh desktop)")
    return found


def write_xauthority(path, cookie):
    """One FamilyWild entry with an empty display number: matches any display."""
    def field(b):
        return struct.pack(">H", len(b)) + b
    with open(path, "wb") as f:
        f.write(struct.pack(">H", 0xFFFF) + field(b"") + field(b"") + field(b"MIT-MAGIC-COOKIE-1") + field(cookie))
    os.chmod(path, 0o600)


class Desktop:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.children = []
        self.apps = []
        self.dir = tempfile.mkdtemp(prefix="loopgate-desktop-")
        self.xauth = os.path.join(self.dir, "Xauthority")
        write_xauthority(self.xauth, secrets.token_bytes(16))
        self.display = self.start_x()
        self.env = dict(os.environ)
        self.env.update({"DISPLAY": self.display, "XAUTHORITY": self.xauth})
        self.env.pop("WAYLAND_DISPLAY", None)
        self.bus = self.start_bus()
        self.env.update({
            "AT_SPI_BUS_ADDRESS": self.bus,
            "DBUS_SESSION_BUS_ADDRESS": self.bus,
            "GTK_A11Y": "atspi",
            "GSETTINGS_BACKEND": "memory",
            "NO_AT_BRIDGE": "0",
            "QT_ACCESSIBILITY": "1",
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        })
        os.environ.update(self.env)
        self.spawn([need("matchbox-window-manager"), "-use_titlebar", "no"])
        self.spawn([self.registryd()])
        import gi
        gi.require_version("Atspi", "2.0")
        from gi.repository import Atspi
        self.Atspi = Atspi
        Atspi.init()
        deadline = time.monotonic() + 20
        while True:
            try:
                Atspi.get_desktop(0).get_child_count()
                break
            except Exception as e:  # registry not up yet
                if time.monotonic() > deadline:
                    raise Fail("start", f"the accessibility registry did not answer: {e}")
                time.sleep(0.05)
        self.xdotool = need("xdotool")

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=self.env if hasattr(self, "env") else None, **kw)
        self.children.append(p)
        return p

    def start_x(self):
        """Xvfb on the first display number whose lock it wins. Its lock file
        (/tmp/.X<n>-lock, taken atomically) arbitrates between desktops sharing a /tmp:
        without the abstract socket, binding the socket file is no test of a free number."""
        xvfb = need("Xvfb")
        os.environ["XAUTHORITY"] = self.xauth
        last = ""
        for n in range(0, 200):
            if lock_is_live(f"/tmp/.X{n}-lock"):
                continue
            display = f":{n}"
            # Only a socket file in this sandbox's /tmp: no TCP, no abstract socket (shared
            # by every process in the network namespace), a cookie required.
            p = subprocess.Popen(
                [xvfb, display, "-screen", "0", f"{self.width}x{self.height}x24",
                 "-nolisten", "tcp", "-nolisten", "local", "-auth", self.xauth, "-noreset"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 20
            while p.poll() is None:
                if display_answers(display):
                    self.children.append(p)
                    threading_drain(p.stderr)
                    return display
                if time.monotonic() > deadline:
                    p.kill()
                    raise Fail("start", f"Xvfb on {display} did not answer within 20s")
                time.sleep(0.02)
            # Lost the lock to another server (or failed): the next number.
            last = p.stderr.read().decode(errors="replace").strip()[-300:]
        raise Fail("start", f"Xvfb did not start: {last}")

    def start_bus(self):
        conf = "/usr/share/defaults/at-spi2/accessibility.conf"
        if not os.path.exists(conf):
            raise Fail("missing_tool", f"{conf} not found (install at-spi2-core)")
        address = "unix:path=" + os.path.join(self.dir, "a11y-bus")
        p = subprocess.Popen([need("dbus-daemon"), "--nofork", "--config-file=" + conf, "--address=" + address,
                              "--print-address=1"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=self.env)
        self.children.append(p)
        line = p.stdout.readline().decode().strip()
        if not line:
            raise Fail("start", "the accessibility bus (dbus-daemon) did not start")
        return line

    def registryd(self):
        for path in ("/usr/libexec/at-spi2-registryd", "/usr/lib/at-spi2-core/at-spi2-registryd"):
            if os.path.exists(path):
                return path
        raise Fail("missing_tool", "at-spi2-registryd not found (install at-spi2-core)")

    def close(self):
        for p in reversed(self.apps + self.children):
            if p.poll() is None:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- requests ---

    def op_launch(self, req):
        log = open(os.path.join(self.dir, f"app-{len(self.apps)}.log"), "wb")
        p = subprocess.Popen(["sh", "-c", req["command"]], cwd=req.get("cwd") or None, env=self.env,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.apps.append(p)
        p.log_path = log.name
        return {"pid": p.pid}

    def op_app_status(self, req):
        out = []
        for p in self.apps:
            tail = ""
            code = p.poll()
            if code is not None:
                try:
                    with open(p.log_path, "rb") as f:
                        tail = f.read()[-600:].decode(errors="replace")
                except OSError:
                    pass
            out.append({"pid": p.pid, "exit": code, "tail": tail})
        return {"apps": out}

    def node(self, acc, key, depth, budget):
        Atspi = self.Atspi
        budget[0] -= 1
        role = acc.get_role_name() or ""
        name = acc.get_name() or ""
        states = acc.get_state_set()
        flags = []
        for st, label in ((Atspi.StateType.FOCUSED, "focused"), (Atspi.StateType.CHECKED, "checked"),
                          (Atspi.StateType.SELECTED, "selected")):
            if states.contains(st):
                flags.append(label)
        if not states.contains(Atspi.StateType.SENSITIVE) and states.contains(Atspi.StateType.SHOWING):
            flags.append("disabled")
        if not name:
            name = labelled_by(Atspi, acc)
        text = None
        if role in TEXT_ROLES and "Text" in (acc.get_interfaces() or []):
            try:
                text = Atspi.Text.get_text(acc, 0, min(Atspi.Text.get_character_count(acc), 4000))
            except Exception:
                text = None
        out = {"key": key, "role": role, "name": name, "flags": flags,
               "showing": states.contains(Atspi.StateType.SHOWING)}
        if text is not None:
            out["text"] = text
        kids = []
        if depth < MAX_DEPTH:
            for i in range(acc.get_child_count()):
                if budget[0] <= 0:
                    out["truncated"] = True
                    break
                child = acc.get_child_at_index(i)
                if child is None:
                    continue
                kids.append(self.node(child, f"{key}.{i}", depth + 1, budget))
        out["children"] = kids
        return out

    def op_tree(self, req):
        desktop = self.Atspi.get_desktop(0)
        budget = [MAX_NODES]
        apps = []
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is None:
                continue
            try:
                pid = app.get_process_id()
                windows = []
                for j in range(app.get_child_count()):
                    w = app.get_child_at_index(j)
                    if w is not None:
                        windows.append(self.node(w, f"{pid}:{j}", 0, budget))
                apps.append({"pid": pid, "name": app.get_name() or "", "windows": windows})
            except Exception:
                continue  # an application that went away mid-walk
        return {"apps": apps}

    def resolve(self, key, role=None):
        acc = self.walk_to(key)
        if role is not None and acc.get_role_name() != role:
            raise Fail("stale", f"the element there is now a {acc.get_role_name()}")
        return acc

    def walk_to(self, key):
        pid_s, _, path = key.partition(":")
        desktop = self.Atspi.get_desktop(0)
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is None or str(app.get_process_id()) != pid_s:
                continue
            acc = app
            for part in path.split("."):
                idx = int(part)
                if idx >= acc.get_child_count():
                    raise Fail("stale", "the element is gone")
                acc = acc.get_child_at_index(idx)
                if acc is None:
                    raise Fail("stale", "the element is gone")
            return acc
        raise Fail("stale", "its application is gone")

    def center(self, acc):
        if "Component" not in (acc.get_interfaces() or []):
            raise Fail("stale", "the element has no position on screen")
        ext = self.Atspi.Component.get_extents(acc, self.Atspi.CoordType.SCREEN)
        if ext.width <= 0 or ext.height <= 0:
            raise Fail("stale", "the element is not on screen")
        x, y = ext.x + ext.width // 2, ext.y + ext.height // 2
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise Fail("stale", f"the element's centre ({x},{y}) is off the screen")
        return x, y

    def xdo(self, *args):
        r = subprocess.run([self.xdotool, *args], env=self.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        if r.returncode != 0:
            raise Fail("input", f"xdotool {args[0]}: {r.stderr.decode(errors='replace').strip()[:300]}")

    def op_click(self, req):
        if "key" in req:
            x, y = self.center(self.resolve(req["key"], req.get("role")))
        else:
            x, y = int(req["x"]), int(req["y"])
            if not (0 <= x < self.width and 0 <= y < self.height):
                raise Fail("bad_request", f"({x},{y}) is off the {self.width}x{self.height} screen")
        button = str(int(req.get("button", 1)))
        self.xdo("mousemove", "--sync", str(x), str(y))
        self.xdo("click", "--repeat", str(int(req.get("count", 1))), button)
        return {"x": x, "y": y}

    def op_focus(self, req):
        acc = self.resolve(req["key"], req.get("role"))
        interfaces = acc.get_interfaces() or []
        if "Component" not in interfaces or not self.Atspi.Component.grab_focus(acc):
            x, y = self.center(acc)
            self.xdo("mousemove", "--sync", str(x), str(y))
            self.xdo("click", "1")
        if req.get("clear") and "EditableText" in interfaces and "Text" in interfaces:
            count = self.Atspi.Text.get_character_count(acc)
            if count > 0:
                self.Atspi.EditableText.delete_text(acc, 0, count)
        return {}

    def op_type(self, req):
        self.xdo("type", "--delay", "8", "--", req["text"])
        return {}

    def op_key(self, req):
        self.xdo("key", "--delay", "8", "--", req["key"])
        return {}

    def op_screenshot(self, req):
        return {"png": base64.b64encode(screenshot(self.display, self.width, self.height)).decode()}


def labelled_by(Atspi, acc):
    """The name of the label a nameless element is labelled by (GTK's mnemonic labels)."""
    try:
        for rel in acc.get_relation_set() or []:
            if rel.get_relation_type() == Atspi.RelationType.LABELLED_BY and rel.get_n_targets() > 0:
                return rel.get_target(0).get_name() or ""
    except Exception:
        return ""
    return ""


def lock_is_live(path):
    """Whether an X server lock file names a process that still exists (a killed server
    leaves its lock behind; Xvfb takes such a stale lock over)."""
    try:
        with open(path) as f:
            pid = int(f.read().strip() or "0")
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def display_answers(display):
    """Whether a client with this desktop's cookie ($XAUTHORITY) can open `display`."""
    x11 = libx11()
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        return False
    x11.XCloseDisplay(dpy)
    return True


_X11 = []


def libx11():
    """libX11 through ctypes, its signatures declared once."""
    if _X11:
        return _X11[0]
    x11 = ctypes.cdll.LoadLibrary("libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XGetImage.restype = ctypes.POINTER(XImage)
    x11.XGetImage.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_uint,
                              ctypes.c_uint, ctypes.c_ulong, ctypes.c_int]
    x11.XFree.argtypes = [ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    _X11.append(x11)
    return x11


def threading_drain(stream):
    import threading

    def drain():
        for _ in stream:
            pass
    threading.Thread(target=drain, daemon=True).start()


class XImage(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int), ("xoffset", ctypes.c_int),
                ("format", ctypes.c_int), ("data", ctypes.c_void_p), ("byte_order", ctypes.c_int),
                ("bitmap_unit", ctypes.c_int), ("bitmap_bit_order", ctypes.c_int),
                ("bitmap_pad", ctypes.c_int), ("depth", ctypes.c_int), ("bytes_per_line", ctypes.c_int),
                ("bits_per_pixel", ctypes.c_int), ("red_mask", ctypes.c_ulong),
                ("green_mask", ctypes.c_ulong), ("blue_mask", ctypes.c_ulong)]


def screenshot(display, width, height):
    """The root window through XGetImage, as an RGB PNG."""
    x11 = libx11()
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        raise Fail("screenshot", f"cannot open display {display}")
    try:
        img = x11.XGetImage(dpy, x11.XDefaultRootWindow(dpy), 0, 0, width, height, 0xFFFFFFFF, 2)
        if not img:
            raise Fail("screenshot", "XGetImage failed")
        im = img.contents
        if im.bits_per_pixel != 32:
            raise Fail("screenshot", f"unsupported {im.bits_per_pixel} bits per pixel")
        bpl = im.bytes_per_line
        raw = ctypes.string_at(im.data, bpl * im.height)
        x11.XFree(ctypes.c_void_p(im.data))
        x11.XFree(ctypes.cast(img, ctypes.c_void_p))
    finally:
        x11.XCloseDisplay(dpy)
    rows = bytearray()
    for y in range(height):
        row = raw[y * bpl:y * bpl + width * 4]
        rgb = bytearray(width * 3)
        rgb[0::3] = row[2::4]
        rgb[1::3] = row[1::4]
        rgb[2::3] = row[0::4]
        rows += b"\x00" + rgb

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


def main():
    width, height = int(sys.argv[1]), int(sys.argv[2])
    try:
        desk = Desktop(width, height)
    except Fail as e:
        reply({"ok": False, "kind": e.kind, "message": e.message})
        return 1
    except Exception as e:
        reply({"ok": False, "kind": "start", "message": f"{type(e).__name__}: {e}"})
        return 1
    reply({"ok": True, "display": desk.display})
    try:
        for line in sys.stdin:
            try:
                req = json.loads(line)
                handler = getattr(desk, "op_" + str(req.get("op")), None)
                if handler is None:
                    raise Fail("bad_request", f"unknown op {req.get('op')!r}")
                out = handler(req)
                out["ok"] = True
                reply(out)
            except Fail as e:
                reply({"ok": False, "kind": e.kind, "message": e.message})
            except Exception as e:
                reply({"ok": False, "kind": "internal", "message": f"{type(e).__name__}: {e}"})
    finally:
        desk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
