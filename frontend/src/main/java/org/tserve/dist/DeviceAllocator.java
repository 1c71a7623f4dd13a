package org.tserve.dist;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Hands out accelerator ids to workers: each worker reserves the devices it needs (one, or
 * {@code parallelLevel} for a torchrun worker), contiguous where possible, only among the
 * model's {@code deviceIds} when it names some, and gives them back when it stops. A request
 * that does not fit is refused with the numbers, never over-committed.
 */
public final class DeviceAllocator {
    private final int total;
    /** device id → owner (worker name) of the devices in use. */
    private final Map<Integer, String> inUse = new TreeMap<>();

    public DeviceAllocator(int total) {
        this.total = Math.max(0, total);
    }

    public int total() {
        return total;
    }

    public synchronized int free() {
        return total - inUse.size();
    }

    /**
     * Reserves {@code count} devices for {@code owner}.
     *
     * @param allowed the model's deviceIds, or an empty list for any device
     */
    public synchronized DeviceReservation reserve(String owner, int count, List<Integer> allowed)
            throws InsufficientDevicesException {
        if (count < 1) {
            throw new IllegalArgumentException("a reservation needs at least one device, got " + count);
        }
        List<Integer> candidates = new ArrayList<>();
        if (allowed == null || allowed.isEmpty()) {
            for (int id = 0; id < total; id++) {
                candidates.add(id);
            }
        } else {
            for (int id : allowed) {
                if (id < 0 || id >= total) {
                    throw new InsufficientDevicesException(owner + ": deviceIds names device " + id
                            + " but this server has " + total + " device(s) (ids 0.." + (total - 1)
                            + "); fix deviceIds in model-config.yaml or number_of_gpu", count, free());
                }
                candidates.add(id);
            }
        }
        List<Integer> freeIds = new ArrayList<>();
        for (int id : candidates) {
            if (!inUse.containsKey(id)) {
                freeIds.add(id);
            }
        }
        if (freeIds.size() < count) {
            String scope = (allowed == null || allowed.isEmpty()) ? "" : " among deviceIds " + allowed;
            throw new InsufficientDevicesException(owner + " needs " + count + " device(s) but only "
                    + freeIds.size() + " of " + candidates.size() + " are free" + scope
                    + " (in use: " + describeInUse() + "); lower parallelLevel or the worker count, or free devices",
                    count, freeIds.size());
        }
        List<Integer> chosen = contiguousRun(freeIds, count);
        for (int id : chosen) {
            inUse.put(id, owner);
        }
        return new DeviceReservation(owner, chosen);
    }

    public synchronized void release(DeviceReservation reservation) {
        if (reservation == null) {
            return;
        }
        for (int id : reservation.deviceIds()) {
            inUse.remove(id, reservation.owner());
        }
    }

    /** The first run of consecutive ids of the right length, else the lowest free ids. */
    private static List<Integer> contiguousRun(List<Integer> freeIds, int count) {
        for (int start = 0; start + count <= freeIds.size(); start++) {
            if (freeIds.get(start + count - 1) - freeIds.get(start) == count - 1) {
                return new ArrayList<>(freeIds.subList(start, start + count));
            }
        }
        return new ArrayList<>(freeIds.subList(0, count));
    }

    private String describeInUse() {
        if (inUse.isEmpty()) {
            return "none";
        }
        StringBuilder sb = new StringBuilder();
        inUse.forEach((id, who) -> sb.append(sb.length() == 0 ? "" : ", ").append(id).append('=').append(who));
        return sb.toString();
    }
}
