package org.tserve.dist;

import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;

/** The devices one worker holds until it stops. */
public final class DeviceReservation {
    private final String owner;
    private final List<Integer> deviceIds;

    DeviceReservation(String owner, List<Integer> deviceIds) {
        this.owner = owner;
        this.deviceIds = Collections.unmodifiableList(deviceIds);
    }

    public String owner() {
        return owner;
    }

    public List<Integer> deviceIds() {
        return deviceIds;
    }

    /** The first device, as TorchServe's {@code gpu_id}. */
    public int firstDevice() {
        return deviceIds.get(0);
    }

    /** Value for CUDA_VISIBLE_DEVICES: exactly this worker's devices. */
    public String cudaVisibleDevices() {
        return deviceIds.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    @Override
    public String toString() {
        return owner + " on devices [" + cudaVisibleDevices() + "]";
    }
}
