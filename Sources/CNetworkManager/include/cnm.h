// NetworkManager's D-Bus API, as much of it as the setup mode needs (docs/wifi-setup.md), through libdbus-1 loaded
// with dlopen at the first call, not linked: a unit that never needs setup mode maps none of it. Every call
// blocks on the system bus (at most CNM_TIMEOUT_MS each), so Swift runs them on a thread of their own.
#ifndef CNM_H
#define CNM_H

#include <stddef.h>
#include <stdint.h>

/// The wait of one call to NetworkManager, in milliseconds.
#define CNM_TIMEOUT_MS 10000

/// An error return: libdbus-1 cannot be loaded.
#define CNM_NOT_INSTALLED (-2)
/// An error return: the call failed (`error` says why: D-Bus's error name and message).
#define CNM_FAILED (-1)

typedef struct cnm cnm;

/// A connection to the bus at `address` (NULL: the system bus, `DBUS_SYSTEM_BUS_ADDRESS` honoured) with
/// NetworkManager's signals subscribed; NULL with `error` set when libdbus-1, the bus or NetworkManager does not
/// answer.
cnm *cnm_open(const char *address, char *error, size_t error_size);
void cnm_close(cnm *manager);

/// NetworkManager's `State` (70: connected with a default route) and `Connectivity` (4: full).
int cnm_state(cnm *manager, uint32_t *state, uint32_t *connectivity, char *error, size_t error_size);

/// The object path of the Wi-Fi device on `interface` (any Wi-Fi device when `interface` is empty) into `path`.
int cnm_wifi_device(cnm *manager, const char *interface, char *path, size_t path_size, char *error, size_t error_size);

/// How many saved Wi-Fi connections there are, leaving out access points (mode `ap`).
int cnm_saved_wifi(cnm *manager, int *count, char *error, size_t error_size);

/// One network of a scan: its SSID's bytes, NetworkManager's strength (0-100), its frequency (MHz, 0 unknown), and
/// whether it asks for WPA
/// (`secured`: WPA or RSN flags set) or for something the setup mode does not offer (`enterprise`: 802.1X).
typedef void (*cnm_network_callback)(const uint8_t *ssid, size_t ssid_length, uint8_t strength, uint32_t frequency,
                                     int secured, int enterprise, void *userdata);

/// Asks the device to scan (a refused request, such as one too soon after the last, is not an error) and lists
/// the networks it knows now.
int cnm_networks(cnm *manager, const char *device, cnm_network_callback callback, void *userdata, char *error,
                 size_t error_size);

/// Activates a new connection on `device`: an access point (`access_point` 1: WPA2-PSK, NetworkManager's shared
/// IPv4 with its DHCP, kept in memory only, on `channel` when it is not 0: a radio that holds one channel at a time
/// joins a network only on its access point's channel) or a station (`passphrase` NULL for an open network; saved by
/// NetworkManager in its own root-only file). The saved connection's path goes into `connection`, the active
/// connection's into `active` (each of `path_size` bytes).
int cnm_activate(cnm *manager, const char *device, const uint8_t *ssid, size_t ssid_length, const char *passphrase,
                 int access_point, uint32_t channel, int hidden, char *connection, char *active, size_t path_size,
                 char *error, size_t error_size);

/// Deletes a saved connection (the profile of a join that failed; one that is already gone is not an error).
int cnm_delete_connection(cnm *manager, const char *connection, char *error, size_t error_size);

/// Deactivates an active connection (one that is already gone is not an error).
int cnm_deactivate(cnm *manager, const char *active, char *error, size_t error_size);

/// Asks NetworkManager to join a saved Wi-Fi network again (ActivateConnection): the first of the device's
/// available connections that is a station's, into `connection`, when the device is disconnected or failed. An
/// explicit activation, so it also brings back a network NetworkManager's autoconnect has blocked (a handshake
/// that timed out is taken for a wrong key: "no secrets"). 0 when asked; 1 when there was nothing to do (the
/// device is joining, connected or has no radio, or no saved network is in range).
int cnm_reconnect(cnm *manager, const char *device, char *connection, size_t path_size, char *error,
                  size_t error_size);

/// An active connection's `State` (1 activating, 2 activated, 3 deactivating, 4 deactivated; 4 also when it is
/// gone) and its device's `StateReason` (7 no secrets, 53 SSID not found, 15-17 DHCP, 8-11 the supplicant).
int cnm_active_state(cnm *manager, const char *active, const char *device, uint32_t *state, uint32_t *reason,
                     char *error, size_t error_size);

/// Waits up to `timeout_ms` for a signal of NetworkManager: 1 when one came, 0 when none did, CNM_FAILED when the
/// bus went away.
int cnm_wait(cnm *manager, int timeout_ms);

/// Ends a cnm_wait under way at once (callable from any thread while `manager` is open): a call queued for the
/// waiting thread runs without sitting out the wait.
void cnm_wake(cnm *manager);

#endif
