// Reliability: failure rate (job MTBF), store write bandwidth and restart time as sliders
// over the scenario's values; what a checkpoint saves (checkpoint.contents), whether every
// rank writes its share (checkpoint.sharded) and the mode (checkpoint.mode) as what-if
// controls of the checkpoint's size and cost; the goodput-vs-checkpoint-interval curve
// (app::run_checkpoint's sweep) with Young's, Daly's and the simulated optimum marked; the
// sync vs async recommendation.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include <QPointer>

#include "stepcast/app/checkpoint.h"
#include "view.h"

class QChart;
class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineSeries;
class QPlainTextEdit;
class QSlider;
class QThread;
class QTimer;

namespace stepcast::gui {

class ReliabilityView : public View {
  Q_OBJECT

 public:
  ReliabilityView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~ReliabilityView() override;
  bool busy() const override;
  void prepareScreenshot() override;

  // One slider over a scenario value. Log sliders move by 2^(1/16) per step around the
  // value the document had when the slider was last synchronised (its centre), so k steps
  // multiply the value by exactly 2^(k/16); linear ones by `step` from 0.
  struct Knob {
    QSlider* slider = nullptr;
    QLabel* label = nullptr;
    bool log = false;
    double anchor = 1;  // log: the value at the centre position
    double step = 1;    // linear: the value of one position
    std::function<QString(double)> format;
    std::function<void(double)> commit;  // writes the value into the document
    double value(int position) const;
    int position(double value) const;
  };
  static constexpr int kLogStepsPerOctave = 16;
  static constexpr int kLogOctaves = 7;  // each side of the centre

  // For tests: the controls and what the view shows.
  QSlider* mtbfSlider() const { return knobs_[kMtbf].slider; }
  QSlider* writeBandwidthSlider() const { return knobs_[kWrite].slider; }
  QSlider* detectionSlider() const { return knobs_[kDetection].slider; }
  QSlider* rescheduleSlider() const { return knobs_[kReschedule].slider; }
  QSlider* initSlider() const { return knobs_[kInit].slider; }
  const Knob& knob(int i) const { return knobs_[static_cast<std::size_t>(i)]; }
  // The "Checkpoint" group: one box per state part (kAllStateParts order), sharded, mode.
  QGroupBox* checkpointGroup() const { return checkpoint_group_; }
  QCheckBox* partBox(StatePart part) const { return parts_[static_cast<std::size_t>(part)]; }
  QCheckBox* shardedBox() const { return sharded_; }
  QComboBox* modeBox() const { return mode_; }
  QLabel* sizeLabel() const { return size_; }
  // The checkpoint size the size row shows (the advice's sync CheckpointCost::total_bytes),
  // bytes; NaN while there is no advice.
  double checkpointBytes() const;
  QLabel* messageLabel() const { return message_; }
  QLabel* recommendationLabel() const { return recommendation_; }
  QChart* chart() const { return chart_; }
  // The simulated goodput (%) against the compute between checkpoints (s), recommended mode.
  QLineSeries* curve() const { return curve_; }
  QLineSeries* dalyCurve() const { return daly_curve_; }
  // Vertical lines at Young's, Daly's and the simulated optimum interval (s), recommended mode.
  QLineSeries* youngMarker() const { return young_; }
  QLineSeries* dalyMarker() const { return daly_; }
  QLineSeries* optimumMarker() const { return optimum_; }
  // The last computed advice (null while none, or when the scenario cannot give one).
  const app::CheckpointReport* report() const { return report_.get(); }

  enum KnobId { kMtbf = 0, kWrite, kDetection, kReschedule, kInit, kKnobs };

 private:
  void buildKnob(KnobId id, const QString& name, const QString& tip);
  void syncFromDocument();
  void knobMoved(KnobId id);
  void commitPending();
  void scheduleCompute();
  void startCompute();
  void finishCompute(std::shared_ptr<Result<app::CheckpointReport>> result);
  void showReport();
  void setKnobsEnabled(bool on);
  void writeFailureRates(double mtbf_h);
  void writeFailureField(const char* key, double value);
  void buildCheckpointGroup();
  void syncCheckpointControls(const Scenario& s);
  void setCheckpointEnabled(bool on);
  void partToggled(StatePart part, bool on);
  void shardedToggled(bool on);
  void modeChosen(int index);

  std::vector<Knob> knobs_;
  QLabel* message_ = nullptr;
  QLabel* size_ = nullptr;  // checkpoint size (derived: the format has no size field)
  QGroupBox* checkpoint_group_ = nullptr;
  std::array<QCheckBox*, kStateParts> parts_{};
  QCheckBox* sharded_ = nullptr;
  QComboBox* mode_ = nullptr;
  QLabel* recommendation_ = nullptr;
  QPlainTextEdit* details_ = nullptr;
  QChart* chart_ = nullptr;
  QLineSeries* curve_ = nullptr;
  QLineSeries* daly_curve_ = nullptr;
  QLineSeries* young_ = nullptr;
  QLineSeries* daly_ = nullptr;
  QLineSeries* optimum_ = nullptr;

  // Slider moves are coalesced: the document is edited once the slider rests for a moment
  // (or is released), and a change while the worker runs starts one more run after it.
  QTimer* debounce_ = nullptr;
  int pending_knob_ = -1;
  std::vector<double> written_;  // per knob, the value it last wrote (NaN: none)
  bool compute_pending_ = false;
  bool running_ = false;
  QPointer<QThread> thread_;
  std::shared_ptr<const app::CheckpointReport> report_;
};

}  // namespace stepcast::gui
