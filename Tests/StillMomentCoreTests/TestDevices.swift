// The tests name any device (ALSA's `file:` captures, `plug:…`) through the device-name
// guard's Testing SPI: no front-end can reach it.
@_spi(Testing) import StillMomentAudio

extension DeviceConfiguration {
    init(name: String, bufferMicroseconds: Int? = nil, periods: Int? = nil, ringFrames: Int? = nil,
         realtime: Bool = true, standby: Standby? = nil) {
        self.init(name: DeviceName(testing: name), bufferMicroseconds: bufferMicroseconds, periods: periods,
                  ringFrames: ringFrames, realtime: realtime, standby: standby)
    }
}
