"""``SidecarOptions``: every option once (field, help, flag, backends, check), and the argument checks they
use: a new option goes here."""
