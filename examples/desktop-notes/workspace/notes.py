#!/usr/bin/python3
"""Notes: type a note, press Save, and the note is listed under "Saved:"."""
import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402


def main():
    window = Gtk.Window(title="Notes")
    window.set_default_size(420, 240)
    window.connect("destroy", Gtk.main_quit)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8, margin=12)
    label = Gtk.Label(label="Note", xalign=0)
    entry = Gtk.Entry()
    label.set_mnemonic_widget(entry)
    saved = Gtk.Label(label="Saved: (nothing yet)", xalign=0)
    save = Gtk.Button(label="Save")

    def on_save(_button):
        saved.set_text("Saved: " + entry.get_text())

    save.connect("clicked", on_save)
    for widget in (label, entry, save, saved):
        box.pack_start(widget, False, False, 0)
    window.add(box)
    window.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
