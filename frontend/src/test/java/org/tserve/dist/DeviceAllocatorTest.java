package org.tserve.dist;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.Arrays;
import java.util.Collections;
import org.junit.Test;

public class DeviceAllocatorTest {
    @Test
    public void reservesContiguousDevicesAndReleasesThem() throws Exception {
        DeviceAllocator gpus = new DeviceAllocator(4);
        DeviceReservation a = gpus.reserve("W-9000-llama", 2, Collections.emptyList());
        DeviceReservation b = gpus.reserve("W-9001-llama", 2, Collections.emptyList());
        assertEquals(Arrays.asList(0, 1), a.deviceIds());
        assertEquals(Arrays.asList(2, 3), b.deviceIds());
        assertEquals("2,3", b.cudaVisibleDevices());
        assertEquals(0, gpus.free());
        gpus.release(a);
        assertEquals(2, gpus.free());
        assertEquals(Arrays.asList(0, 1), gpus.reserve("W-9002-llama", 2, Collections.emptyList()).deviceIds());
    }

    @Test
    public void prefersAContiguousRunOverTheLowestIds() throws Exception {
        DeviceAllocator gpus = new DeviceAllocator(4);
        DeviceReservation one = gpus.reserve("a", 1, Collections.emptyList());
        gpus.reserve("b", 1, Collections.emptyList());
        gpus.release(one);                       // free: 0, 2, 3
        assertEquals(Arrays.asList(2, 3), gpus.reserve("c", 2, Collections.emptyList()).deviceIds());
    }

    @Test
    public void refusesWhatDoesNotFitWithTheNumbers() throws Exception {
        DeviceAllocator gpus = new DeviceAllocator(3);
        gpus.reserve("W-9000-m", 2, Collections.emptyList());
        try {
            gpus.reserve("W-9001-m", 2, Collections.emptyList());
            fail("expected a refusal");
        } catch (InsufficientDevicesException e) {
            assertEquals(2, e.needed());
            assertEquals(1, e.free());
            assertTrue(e.getMessage(), e.getMessage().contains("needs 2 device(s) but only 1 of 3 are free"));
            assertTrue(e.getMessage(), e.getMessage().contains("0=W-9000-m"));
        }
        assertEquals("a refused reservation holds nothing", 1, gpus.free());
    }

    @Test
    public void honoursDeviceIds() throws Exception {
        DeviceAllocator gpus = new DeviceAllocator(4);
        assertEquals(Arrays.asList(2, 3), gpus.reserve("a", 2, Arrays.asList(2, 3)).deviceIds());
        try {
            gpus.reserve("b", 1, Arrays.asList(2, 3));
            fail("deviceIds 2,3 are taken");
        } catch (InsufficientDevicesException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("among deviceIds [2, 3]"));
        }
        assertEquals(Arrays.asList(0), gpus.reserve("c", 1, Collections.emptyList()).deviceIds());
    }

    @Test
    public void deviceIdsOutsideTheServerAreAnError() {
        DeviceAllocator gpus = new DeviceAllocator(2);
        try {
            gpus.reserve("a", 1, Arrays.asList(5));
            fail("device 5 does not exist");
        } catch (InsufficientDevicesException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("names device 5 but this server has 2 device(s)"));
        }
    }

    @Test
    public void noDevicesMeansEveryGpuReservationFails() {
        DeviceAllocator none = new DeviceAllocator(0);
        try {
            none.reserve("a", 1, Collections.emptyList());
            fail("no devices");
        } catch (InsufficientDevicesException e) {
            assertEquals(0, e.free());
        }
    }

    @Test
    public void countsCudaVisibleDevicesAndConfiguredNumbers() {
        assertEquals(3, DeviceInventory.countVisible("0,1,3"));
        assertEquals(0, DeviceInventory.countVisible(""));
        assertEquals(0, DeviceInventory.countVisible("-1"));
        assertEquals(1, DeviceInventory.countVisible("2,-1,3"));
        assertEquals("no GPU detected: the configured count stands", 4, DeviceInventory.count(4, 0));
        assertEquals("capped at the detected count", 2, DeviceInventory.count(4, 2));
        assertEquals(1, DeviceInventory.count(1, 2));
        assertEquals("unset: what is detected", 2, DeviceInventory.count(null, 2));
        assertEquals(0, DeviceInventory.count(-2, 0));
    }
}
