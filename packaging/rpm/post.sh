# %post: $1 is 1 on install, 2 or more on upgrade.
# steerd replaces irqbalance: on first install stop and disable it (remembering that it
# was enabled, so that removing steerd enables it again), then enable and start steerd.
marker=/var/lib/steerd/irqbalance-was-enabled
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
    enabled=no
    systemctl is-enabled --quiet irqbalance.service 2>/dev/null && enabled=yes
    running=no
    [ -d /run/systemd/system ] && systemctl is-active --quiet irqbalance.service 2>/dev/null && running=yes
    if [ "$enabled" = yes ] || [ "$running" = yes ]; then
        echo "steerd: stopping and disabling irqbalance.service: steerd replaces it (removing steerd enables it again)"
        mkdir -p /var/lib/steerd
        [ "$enabled" = yes ] && : > "$marker"
        [ "$running" = yes ] && systemctl stop irqbalance.service || true
        systemctl disable --quiet irqbalance.service 2>/dev/null || true
    fi
    systemctl enable --quiet steerd.service 2>/dev/null || true
    [ -d /run/systemd/system ] && systemctl start steerd.service || true
fi
if [ "$1" -ge 2 ] && [ -d /run/systemd/system ]; then
    systemctl try-restart steerd.service || true
fi
exit 0
