# %postun: $1 is 0 on removal. Give the machine back to irqbalance if installing steerd
# disabled it.
marker=/var/lib/steerd/irqbalance-was-enabled
if [ "$1" -eq 0 ] && [ -e "$marker" ]; then
    rm -f "$marker"
    rmdir /var/lib/steerd 2>/dev/null || true
    if command -v systemctl >/dev/null 2>&1 && systemctl cat irqbalance.service >/dev/null 2>&1; then
        echo "steerd: enabling irqbalance.service again (it was enabled before steerd was installed)"
        systemctl enable --quiet irqbalance.service 2>/dev/null || true
        # Forget the drop-in that refused manual starts while steerd was installed.
        [ -d /run/systemd/system ] && systemctl daemon-reload || true
        [ -d /run/systemd/system ] && systemctl start irqbalance.service || true
    fi
fi
exit 0
