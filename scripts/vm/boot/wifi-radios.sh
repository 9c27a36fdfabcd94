#!/bin/bash
# Simulated Wi-Fi for the booted devices (runner.sh's Wi-Fi checks): mac80211_hwsim's four radios, which really
# associate (WPA2, DHCP over them). wlan0 stays the device's (NetworkManager's, and ap0 beside it from the package's
# replenish-agent-ap0.service); wlan1 goes to the network namespace "phone" (wpa_supplicant as a station, started by
# runner.sh); wlan2 to "home": the customer's network, hostapd (WPA2, "Home Net", channel 6) with dnsmasq's DHCP;
# wlan3 to "stranger": a second phone without the label, which tries the access point with a wrong passphrase.
#   wifi-radios.sh            at boot (vm-test-wifi.service): the radios, the namespaces, the home network up
#   wifi-radios.sh home-stop  the home access point off (its router restarting)
#   wifi-radios.sh home-start the home access point on again
#   wifi-radios.sh home-start-rekeyed  the home access point on with another passphrase (a router reset to its
#                                      factory key): a device that tries it fails its 4-way handshake
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
state=/run/vm-test
home_ssid="Home Net"
home_passphrase="correct horse battery"

home_start() {
  ip netns exec home hostapd -B -P "$state/hostapd-home.pid" "/usr/local/lib/vm-test/hostapd-home${1:-}.conf" >"$state/hostapd-home.log" 2>&1
}
home_stop() {
  local pid
  pid=$(cat "$state/hostapd-home.pid" 2>/dev/null)
  rm -f "$state/hostapd-home.pid"
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null
  # Gone before anything starts on wlan2 again (a new hostapd cannot take the interface while the old one has it).
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  return 0
}
phy_of() { basename "$(readlink -f "/sys/class/net/$1/phy80211")"; }

case "${1:-boot}" in
home-stop) home_stop; exit ;;
home-start) home_start; exit ;;
home-start-rekeyed) home_start -rekeyed; exit ;;
esac
mkdir -p "$state"
error() { echo "$*" >"$state/wifi-error"; echo "vm-test-wifi: $*" >&2; exit 1; }
modprobe mac80211_hwsim radios=4 || error "modprobe mac80211_hwsim failed"
for _ in $(seq 40); do [ -e /sys/class/net/wlan3 ] && break; sleep 0.5; done
[ -e /sys/class/net/wlan3 ] || error "mac80211_hwsim made no wlan3 ($(ls /sys/class/net | tr '\n' ' '))"
ip netns add phone && ip netns add home && ip netns add stranger || error "ip netns add failed"
iw phy "$(phy_of wlan1)" set netns name phone && iw phy "$(phy_of wlan2)" set netns name home &&
  iw phy "$(phy_of wlan3)" set netns name stranger || error "iw phy … set netns failed"
cat >/usr/local/lib/vm-test/hostapd-home.conf <<HOSTAPD
interface=wlan2
driver=nl80211
ssid=$home_ssid
hw_mode=g
channel=6
wpa=2
wpa_key_mgmt=WPA-PSK
rsn_pairwise=CCMP
wpa_passphrase=$home_passphrase
HOSTAPD
sed "s/^wpa_passphrase=.*/wpa_passphrase=factory key of the router/" /usr/local/lib/vm-test/hostapd-home.conf \
  >/usr/local/lib/vm-test/hostapd-home-rekeyed.conf
ip netns exec home ip link set lo up
ip netns exec home ip addr add 192.168.77.1/24 dev wlan2
ip netns exec home ip link set wlan2 up
ip netns exec phone ip link set lo up
ip netns exec stranger ip link set lo up
home_start || error "hostapd did not start: $(tail -n 3 "$state/hostapd-home.log")"
ip netns exec home dnsmasq --interface=wlan2 --bind-interfaces --port=0 --dhcp-range=192.168.77.10,192.168.77.50,12h \
  --dhcp-option=3,192.168.77.1 --pid-file="$state/dnsmasq-home.pid" --dhcp-leasefile="$state/dnsmasq-home.leases" ||
  error "dnsmasq did not start"
touch "$state/wifi"
