// Collectives: one collective priced as `stepcast collective` prices it (app::run_collective,
// docs/collective.md). The kind, the size, the GPUs and their stride, the cluster (the
// scenario's or a preset), the algorithm and NCCL's protocol are the controls; a table shows
// one row per algorithm (time, algbw, busbw with the nccl-tests definitions, and the band) and
// a chart the busbw of each algorithm against the size, 8 B doubling up to SIZE (nccl-tests'
// -b 8 -e SIZE -f 2). Pricing takes microseconds: it runs on the GUI thread at each change.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "stepcast/app/collective.h"
#include "view.h"

class QChart;
class QComboBox;
class QLabel;
class QLineEdit;
class QLineSeries;
class QSpinBox;
class QTableWidget;

namespace stepcast::gui {

class CollectivesView : public View {
  Q_OBJECT

 public:
  CollectivesView(ScenarioDocument* doc, QWidget* parent = nullptr);
  ~CollectivesView() override;
  // The question docs/gui/collectives.png shows: a 1 GiB all-reduce over 64 GPUs of the
  // scenario's cluster (of dgx-h100 when the scenario is invalid), every algorithm.
  void prepareScreenshot() override;

  // For tests: the controls.
  QComboBox* kindBox() const { return kind_; }
  QLineEdit* sizeEdit() const { return size_; }
  QSpinBox* gpusBox() const { return gpus_; }
  QSpinBox* strideBox() const { return stride_; }
  // "custom", then the scenario plan's groups of more than one rank ("TP group: 8 GPUs,
  // stride 1"), which set GPUs and stride; editing either goes back to "custom".
  QComboBox* groupBox() const { return group_; }
  // Item 0 is the scenario's cluster (disabled while the scenario is invalid), then the
  // cluster presets by name.
  QComboBox* clusterBox() const { return cluster_; }
  // "every algorithm", then auto, ring, tree, hierarchical, pairwise, direct.
  QComboBox* algoBox() const { return algo_; }
  // "the tuner's choice", then LL, LL128, Simple.
  QComboBox* protoBox() const { return proto_; }
  // What the view shows.
  QLabel* messageLabel() const { return message_; }
  QLabel* summaryLabel() const { return summary_; }
  QTableWidget* table() const { return table_; }
  QChart* chart() const { return chart_; }
  // busbw (GB/s) against log2(size in bytes), one curve per row of the table, in its order.
  const std::vector<QLineSeries*>& curves() const { return curves_; }
  // The request the controls make (empty with the message when the size does not parse),
  // and the last report (null while the request is an error).
  Result<app::CollectiveRequest> request() const;
  const app::CollectiveReport* report() const { return report_.get(); }

 private:
  void recompute();
  void showReport();
  // Rebuild from the document without signals (the caller prices once).
  void syncGroups();
  void syncClusters();
  // Writes group item `index`'s GPUs and stride into the spin boxes, without signals.
  void applyGroup(int index);
  void groupChosen(int index);

  QComboBox* kind_ = nullptr;
  QLineEdit* size_ = nullptr;
  QSpinBox* gpus_ = nullptr;
  QSpinBox* stride_ = nullptr;
  QComboBox* group_ = nullptr;
  QComboBox* cluster_ = nullptr;
  QComboBox* algo_ = nullptr;
  QComboBox* proto_ = nullptr;
  QLabel* message_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableWidget* table_ = nullptr;
  QChart* chart_ = nullptr;
  std::vector<QLineSeries*> curves_;
  std::unique_ptr<app::CollectiveReport> report_;
  std::vector<std::vector<app::CollectiveRow>> sweeps_;  // per table row
};

}  // namespace stepcast::gui
