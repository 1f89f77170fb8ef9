# %preun: $1 is 0 on removal (steerd restores what it changed when it stops).
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --quiet steerd.service 2>/dev/null || true
    [ -d /run/systemd/system ] && systemctl stop steerd.service || true
fi
exit 0
